//! Arrow IPC streams written by the core (FORMAT §1): the sections of the tail `git import`
//! and the git seal write (`git/seal.rs`), so that neither loads pyarrow. Uncompressed
//! streams only (the git seal writes no compressed index streams), one record batch each.
//!
//! A stream is the schema message, one record-batch message and the end-of-stream marker;
//! each message is `FF FF FF FF`, its metadata length (the metadata padded so the body starts
//! 8-aligned), the metadata (a flatbuffer `Message`) and the body (every buffer padded to 8
//! bytes). The flatbuffers are laid out front to back (a table's vtable just before it, its
//! strings, vectors and sub-tables after it, every scalar aligned to its size): any order is
//! valid flatbuffers, and this one needs no builder. The column types are the few the tail
//! needs: integers, booleans, UTF-8, binary, fixed-size binary and a list of fixed-size
//! binary. Readers: pyarrow (`tests/test_git_native.py`) and `ipc.rs` (the tests below).

use std::borrow::Cow;

/// A column's Arrow type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int {
        bits: i32,
        signed: bool,
    },
    Bool,
    Utf8,
    Binary,
    FixedSizeBinary(i32),
    /// a list whose items (named `item`, not nullable) are fixed-size binary
    ListOfFixed(i32),
}

pub const U32: Kind = Kind::Int {
    bits: 32,
    signed: false,
};
pub const U64: Kind = Kind::Int {
    bits: 64,
    signed: false,
};
pub const I64: Kind = Kind::Int {
    bits: 64,
    signed: true,
};
pub const I8: Kind = Kind::Int {
    bits: 8,
    signed: true,
};

/// A field of a schema.
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
}

/// One column's values: its length, validity bitmap (None: no nulls) and buffers in Arrow's
/// order (data; or offsets then data; a list: offsets, then its child's buffers).
pub struct Column<'a> {
    len: usize,
    nulls: usize,
    valid: Option<Vec<u8>>,
    buffers: Vec<Cow<'a, [u8]>>,
    child: Option<Box<Column<'a>>>,
}

impl<'a> Column<'a> {
    /// Fixed-width values (integers little-endian, or fixed-size binary), `width` bytes each.
    pub fn fixed(data: impl Into<Cow<'a, [u8]>>, width: usize) -> Column<'a> {
        let data = data.into();
        Column {
            len: data.len() / width.max(1),
            nulls: 0,
            valid: None,
            buffers: vec![data],
            child: None,
        }
    }

    /// Booleans, bit-packed (least significant bit first).
    pub fn bools(values: &[bool]) -> Column<'a> {
        Column {
            len: values.len(),
            nulls: 0,
            valid: None,
            buffers: vec![Cow::Owned(bits(values))],
            child: None,
        }
    }

    /// UTF-8 or binary values: `offsets` (i32 little-endian, one more than the values) into
    /// `data`.
    pub fn var(offsets: impl Into<Cow<'a, [u8]>>, data: impl Into<Cow<'a, [u8]>>) -> Column<'a> {
        let offsets = offsets.into();
        Column {
            len: (offsets.len() / 4).saturating_sub(1),
            nulls: 0,
            valid: None,
            buffers: vec![offsets, data.into()],
            child: None,
        }
    }

    /// Strings (or byte strings) given one by one.
    pub fn strings<S: AsRef<[u8]>>(values: &[S]) -> Column<'static> {
        let mut offsets = Vec::with_capacity(4 * (values.len() + 1));
        let mut data = Vec::new();
        offsets.extend_from_slice(&0i32.to_le_bytes());
        for v in values {
            data.extend_from_slice(v.as_ref());
            offsets.extend_from_slice(&(data.len() as i32).to_le_bytes());
        }
        Column::var(offsets, data)
    }

    /// A list column: `offsets` (i32 little-endian) into the values of `child`.
    pub fn list(offsets: impl Into<Cow<'a, [u8]>>, child: Column<'a>) -> Column<'a> {
        let offsets = offsets.into();
        Column {
            len: (offsets.len() / 4).saturating_sub(1),
            nulls: 0,
            valid: None,
            buffers: vec![offsets],
            child: Some(Box::new(child)),
        }
    }

    /// The same values with nulls where `valid` is false.
    pub fn with_validity(mut self, valid: &[bool]) -> Column<'a> {
        let nulls = valid.iter().filter(|v| !**v).count();
        if nulls > 0 {
            self.nulls = nulls;
            self.valid = Some(bits(valid));
        }
        self
    }

    /// How many values the column holds.
    pub fn len(&self) -> usize {
        self.len
    }
}

fn bits(values: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; values.len().div_ceil(8)];
    for (i, _) in values.iter().enumerate().filter(|(_, v)| **v) {
        out[i / 8] |= 1 << (i % 8);
    }
    out
}

// -- flatbuffers, front to back ------------------------------------------------------------
enum Slot {
    U8(u8),
    Bool(bool),
    I16(i16),
    I32(i32),
    I64(i64),
    Off(Obj),
}

enum Obj {
    Table(Vec<Option<Slot>>),
    Str(Vec<u8>),
    Tables(Vec<Obj>),
    /// a vector of 16-byte structs of two i64 (field nodes, buffers)
    Pairs(Vec<(i64, i64)>),
}

fn size_of(s: &Slot) -> usize {
    match s {
        Slot::U8(_) | Slot::Bool(_) => 1,
        Slot::I16(_) => 2,
        Slot::I32(_) | Slot::Off(_) => 4,
        Slot::I64(_) => 8,
    }
}

struct Fb {
    buf: Vec<u8>,
}

impl Fb {
    fn align(&mut self, to: usize) {
        while !self.buf.len().is_multiple_of(to) {
            self.buf.push(0);
        }
    }

    fn patch(&mut self, at: usize, target: usize) {
        let rel = (target - at) as u32;
        self.buf[at..at + 4].copy_from_slice(&rel.to_le_bytes());
    }

    fn obj(&mut self, o: &Obj) -> usize {
        match o {
            Obj::Table(fields) => self.table(fields),
            Obj::Str(s) => {
                self.align(4);
                let at = self.buf.len();
                self.buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
                self.buf.extend_from_slice(s);
                self.buf.push(0);
                at
            }
            Obj::Tables(items) => {
                self.align(4);
                let at = self.buf.len();
                self.buf
                    .extend_from_slice(&(items.len() as u32).to_le_bytes());
                let slots = self.buf.len();
                self.buf.resize(slots + 4 * items.len(), 0);
                for (k, item) in items.iter().enumerate() {
                    let pos = self.obj(item);
                    self.patch(slots + 4 * k, pos);
                }
                at
            }
            Obj::Pairs(pairs) => {
                while self.buf.len() % 8 != 4 {
                    self.buf.push(0);
                }
                let at = self.buf.len();
                self.buf
                    .extend_from_slice(&(pairs.len() as u32).to_le_bytes());
                for (a, b) in pairs {
                    self.buf.extend_from_slice(&a.to_le_bytes());
                    self.buf.extend_from_slice(&b.to_le_bytes());
                }
                at
            }
        }
    }

    /// A table: its vtable, then the table (soffset to the vtable, then the inline fields,
    /// each aligned to its size), then what its offset fields point at.
    fn table(&mut self, fields: &[Option<Slot>]) -> usize {
        let mut at = Vec::with_capacity(fields.len());
        let mut end = 4usize;
        let mut widest = 4usize;
        for f in fields {
            match f {
                None => at.push(0),
                Some(s) => {
                    let n = size_of(s);
                    end = end.div_ceil(n) * n;
                    at.push(end);
                    end += n;
                    widest = widest.max(n);
                }
            }
        }
        let size = end.div_ceil(widest) * widest;
        self.align(2);
        let vtable = self.buf.len();
        self.buf
            .extend_from_slice(&((4 + 2 * fields.len()) as u16).to_le_bytes());
        self.buf.extend_from_slice(&(size as u16).to_le_bytes());
        for &a in &at {
            self.buf.extend_from_slice(&(a as u16).to_le_bytes());
        }
        self.align(widest);
        let table = self.buf.len();
        self.buf.resize(table + size, 0);
        let soffset = (table - vtable) as i32;
        self.buf[table..table + 4].copy_from_slice(&soffset.to_le_bytes());
        for (f, &a) in fields.iter().zip(&at) {
            let p = table + a;
            match f {
                Some(Slot::U8(v)) => self.buf[p] = *v,
                Some(Slot::Bool(v)) => self.buf[p] = u8::from(*v),
                Some(Slot::I16(v)) => self.buf[p..p + 2].copy_from_slice(&v.to_le_bytes()),
                Some(Slot::I32(v)) => self.buf[p..p + 4].copy_from_slice(&v.to_le_bytes()),
                Some(Slot::I64(v)) => self.buf[p..p + 8].copy_from_slice(&v.to_le_bytes()),
                Some(Slot::Off(_)) | None => {}
            }
        }
        for (f, &a) in fields.iter().zip(&at) {
            if let Some(Slot::Off(o)) = f {
                let pos = self.obj(o);
                self.patch(table + a, pos);
            }
        }
        table
    }

    /// The flatbuffer whose root is `root`, padded to 8 bytes.
    fn finish(root: &Obj) -> Vec<u8> {
        let mut fb = Fb { buf: vec![0; 4] };
        let pos = fb.obj(root);
        fb.patch(0, pos);
        fb.align(8);
        fb.buf
    }
}

// -- Arrow's schema (Schema.fbs) and messages (Message.fbs) ---------------------------------
const V5: i16 = 4;
const SCHEMA: u8 = 1;
const RECORD_BATCH: u8 = 3;

fn key_values(meta: &[(&str, &str)]) -> Obj {
    Obj::Tables(
        meta.iter()
            .map(|(k, v)| {
                Obj::Table(vec![
                    Some(Slot::Off(Obj::Str(k.as_bytes().to_vec()))),
                    Some(Slot::Off(Obj::Str(v.as_bytes().to_vec()))),
                ])
            })
            .collect(),
    )
}

/// `Type` union: its tag and table.
fn type_of(kind: Kind) -> (u8, Obj) {
    match kind {
        Kind::Int { bits, signed } => (
            2,
            Obj::Table(vec![Some(Slot::I32(bits)), Some(Slot::Bool(signed))]),
        ),
        Kind::Binary => (4, Obj::Table(vec![])),
        Kind::Utf8 => (5, Obj::Table(vec![])),
        Kind::Bool => (6, Obj::Table(vec![])),
        Kind::ListOfFixed(_) => (12, Obj::Table(vec![])),
        Kind::FixedSizeBinary(w) => (15, Obj::Table(vec![Some(Slot::I32(w))])),
    }
}

fn field(name: &str, kind: Kind, nullable: bool) -> Obj {
    let children = match kind {
        Kind::ListOfFixed(w) => vec![field("item", Kind::FixedSizeBinary(w), false)],
        _ => vec![],
    };
    let (tag, ty) = type_of(kind);
    Obj::Table(vec![
        Some(Slot::Off(Obj::Str(name.as_bytes().to_vec()))),
        Some(Slot::Bool(nullable)),
        Some(Slot::U8(tag)),
        Some(Slot::Off(ty)),
        None,
        Some(Slot::Off(Obj::Tables(children))),
    ])
}

fn message(tag: u8, header: Obj, body_len: usize) -> Vec<u8> {
    Fb::finish(&Obj::Table(vec![
        Some(Slot::I16(V5)),
        Some(Slot::U8(tag)),
        Some(Slot::Off(header)),
        Some(Slot::I64(body_len as i64)),
    ]))
}

fn frame(out: &mut Vec<u8>, metadata: &[u8], body: &[u8]) {
    out.extend_from_slice(&[0xff; 4]);
    out.extend_from_slice(&(metadata.len() as i32).to_le_bytes());
    out.extend_from_slice(metadata);
    out.extend_from_slice(body);
}

/// Field nodes (pre-order) and buffers of `c`, its buffers appended to `body`.
fn lay_out(
    c: &Column<'_>,
    nodes: &mut Vec<(i64, i64)>,
    bufs: &mut Vec<(i64, i64)>,
    body: &mut Vec<u8>,
) {
    nodes.push((c.len as i64, c.nulls as i64));
    let mut put = |bytes: &[u8], bufs: &mut Vec<(i64, i64)>| {
        bufs.push((body.len() as i64, bytes.len() as i64));
        body.extend_from_slice(bytes);
        body.resize(body.len().div_ceil(8) * 8, 0);
    };
    put(c.valid.as_deref().unwrap_or(&[]), bufs);
    for b in &c.buffers {
        put(b, bufs);
    }
    if let Some(child) = &c.child {
        lay_out(child, nodes, bufs, body);
    }
}

/// The whole stream of one table: `fields` with schema metadata `meta`, `columns` as its one
/// record batch (every column as long as the first).
pub fn stream(fields: &[Field], meta: &[(&str, &str)], columns: &[Column<'_>]) -> Vec<u8> {
    let schema = Obj::Table(vec![
        None,
        Some(Slot::Off(Obj::Tables(
            fields
                .iter()
                .map(|f| field(f.name, f.kind, f.nullable))
                .collect(),
        ))),
        (!meta.is_empty()).then(|| Slot::Off(key_values(meta))),
    ]);
    let mut out = Vec::new();
    frame(&mut out, &message(SCHEMA, schema, 0), &[]);
    let (mut nodes, mut bufs, mut body) = (Vec::new(), Vec::new(), Vec::new());
    for c in columns {
        lay_out(c, &mut nodes, &mut bufs, &mut body);
    }
    let rows = columns.first().map_or(0, Column::len);
    let batch = Obj::Table(vec![
        Some(Slot::I64(rows as i64)),
        Some(Slot::Off(Obj::Pairs(nodes))),
        Some(Slot::Off(Obj::Pairs(bufs))),
    ]);
    frame(&mut out, &message(RECORD_BATCH, batch, body.len()), &body);
    out.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::{self, Type};

    #[test]
    fn the_reader_of_the_crate_reads_what_is_written() {
        let fields = [
            Field {
                name: "name",
                kind: Kind::Utf8,
                nullable: true,
            },
            Field {
                name: "n",
                kind: U64,
                nullable: false,
            },
            Field {
                name: "flag",
                kind: Kind::Bool,
                nullable: false,
            },
            Field {
                name: "id",
                kind: Kind::FixedSizeBinary(3),
                nullable: true,
            },
            Field {
                name: "k",
                kind: I8,
                nullable: false,
            },
        ];
        let n: Vec<u8> = [5u64, 7, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let cols = [
            Column::strings(&["a", "", "héllo"]).with_validity(&[true, false, true]),
            Column::fixed(n, 8),
            Column::bools(&[true, false, true]),
            Column::fixed(&b"abcdefghi"[..], 3).with_validity(&[true, true, false]),
            Column::fixed(&[1u8, 255, 3][..], 1),
        ];
        let raw = stream(&fields, &[("key", "value")], &cols);
        assert_eq!(raw.len() % 8, 0);
        let (schema, batches) = ipc::read_all(&raw).expect("a stream the crate reads");
        assert_eq!(schema.meta("key"), Some("value"));
        let kinds: Vec<(String, Type, bool)> = schema
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.ty, f.nullable))
            .collect();
        assert_eq!(
            kinds[1].1,
            Type::Int {
                bits: 64,
                signed: false
            }
        );
        assert_eq!(kinds[3].1, Type::FixedSizeBinary(3));
        assert!(kinds[0].2 && !kinds[1].2);
        let c = &batches[0];
        assert_eq!(
            (c[0].str(0), c[0].is_null(1), c[0].str(2)),
            ("a", true, "héllo")
        );
        assert_eq!((c[1].uint(0), c[1].uint(2)), (5, 9));
        assert_eq!((c[2].bool(0), c[2].bool(1)), (true, false));
        assert_eq!((c[3].bytes(1), c[3].is_null(2)), (&b"def"[..], true));
        assert_eq!(c[4].int8(1), -1);
    }
}
