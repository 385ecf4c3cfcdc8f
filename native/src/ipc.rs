//! The few Arrow IPC stream messages the tail needs, read by hand (docs/design.md, "The
//! native core": why not the `arrow-ipc` crate).
//!
//! A stream is walked message by message (continuation marker, metadata length, the
//! flatbuffer `Message`, its body) up to the end-of-stream marker; the schema's fields and a
//! record batch's field nodes and buffers are read from the flatbuffers with every offset
//! checked against the bytes. Only the flat column types of the znippy indexes are decoded
//! (Int8/Int32/UInt32/UInt64, Bool, Utf8, FixedSizeBinary); bodies may be compressed with
//! ZSTD (`BodyCompression`, FORMAT §1), each buffer's declared length bounded before anything
//! is allocated. Anything else — another type, LZ4, dictionaries, a big-endian schema — is
//! `Unsupported`: the caller leaves it to the Python reader.

/// Why a stream is not read here.
#[derive(Debug)]
pub enum Problem {
    /// The bytes are not a valid stream: a damaged or forged section.
    Bad(String),
    /// A valid stream this reader does not decode (the Python reader does).
    Unsupported(String),
}

pub type Res<T> = Result<T, Problem>;

fn bad<T>(what: impl Into<String>) -> Res<T> {
    Err(Problem::Bad(what.into()))
}

fn unsupported<T>(what: impl Into<String>) -> Res<T> {
    Err(Problem::Unsupported(what.into()))
}

// -- flatbuffers ------------------------------------------------------------------------------
/// One flatbuffer table: the buffer and the table's position, every read bounds-checked.
#[derive(Clone, Copy)]
struct Table<'a> {
    buf: &'a [u8],
    pos: usize,
    vtable: usize,
    vlen: usize,
}

fn u16_at(buf: &[u8], pos: usize) -> Res<u16> {
    match buf.get(pos..pos + 2) {
        Some(b) => Ok(u16::from_le_bytes([b[0], b[1]])),
        None => bad("flatbuffer offset out of range"),
    }
}

fn u32_at(buf: &[u8], pos: usize) -> Res<u32> {
    match buf.get(pos..pos.saturating_add(4)) {
        Some(b) => Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        None => bad("flatbuffer offset out of range"),
    }
}

fn i64_at(buf: &[u8], pos: usize) -> Res<i64> {
    match buf.get(pos..pos.saturating_add(8)) {
        Some(b) => Ok(i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
        None => bad("flatbuffer offset out of range"),
    }
}

/// Where the uoffset stored at `pos` points.
fn follow(buf: &[u8], pos: usize) -> Res<usize> {
    let off = u32_at(buf, pos)? as usize;
    let target = pos.checked_add(off).filter(|t| *t < buf.len());
    target.ok_or_else(|| Problem::Bad("flatbuffer offset out of range".into()))
}

impl<'a> Table<'a> {
    fn at(buf: &'a [u8], pos: usize) -> Res<Self> {
        let soff = u32_at(buf, pos)? as i32 as i64;
        let vtable = pos as i64 - soff;
        if vtable < 0 || vtable as usize + 4 > buf.len() {
            return bad("flatbuffer vtable out of range");
        }
        let vtable = vtable as usize;
        let vlen = u16_at(buf, vtable)? as usize;
        if vlen < 4 || vtable + vlen > buf.len() {
            return bad("flatbuffer vtable out of range");
        }
        Ok(Table {
            buf,
            pos,
            vtable,
            vlen,
        })
    }

    fn root(buf: &'a [u8]) -> Res<Self> {
        let pos = follow(buf, 0)?;
        Table::at(buf, pos)
    }

    /// The position of field `id`, or None when it is absent (its default).
    fn field(&self, id: usize) -> Res<Option<usize>> {
        let slot = 4 + 2 * id;
        if slot + 2 > self.vlen {
            return Ok(None);
        }
        let off = u16_at(self.buf, self.vtable + slot)? as usize;
        Ok(if off == 0 { None } else { Some(self.pos + off) })
    }

    fn u8(&self, id: usize, default: u8) -> Res<u8> {
        match self.field(id)? {
            Some(p) => self
                .buf
                .get(p)
                .copied()
                .ok_or_else(|| Problem::Bad("flatbuffer field out of range".into())),
            None => Ok(default),
        }
    }

    fn i16(&self, id: usize, default: i16) -> Res<i16> {
        match self.field(id)? {
            Some(p) => Ok(u16_at(self.buf, p)? as i16),
            None => Ok(default),
        }
    }

    fn i32(&self, id: usize, default: i32) -> Res<i32> {
        match self.field(id)? {
            Some(p) => Ok(u32_at(self.buf, p)? as i32),
            None => Ok(default),
        }
    }

    fn i64(&self, id: usize, default: i64) -> Res<i64> {
        match self.field(id)? {
            Some(p) => i64_at(self.buf, p),
            None => Ok(default),
        }
    }

    fn table(&self, id: usize) -> Res<Option<Table<'a>>> {
        match self.field(id)? {
            Some(p) => Ok(Some(Table::at(self.buf, follow(self.buf, p)?)?)),
            None => Ok(None),
        }
    }

    /// A vector field: (position of its first element, its length).
    fn vector(&self, id: usize, elem: usize) -> Res<(usize, usize)> {
        match self.field(id)? {
            Some(p) => {
                let v = follow(self.buf, p)?;
                let n = u32_at(self.buf, v)? as usize;
                let end = n
                    .checked_mul(elem)
                    .and_then(|b| b.checked_add(v + 4))
                    .filter(|e| *e <= self.buf.len());
                if end.is_none() {
                    return bad("flatbuffer vector out of range");
                }
                Ok((v + 4, n))
            }
            None => Ok((0, 0)),
        }
    }

    fn tables(&self, id: usize) -> Res<Vec<Table<'a>>> {
        let (start, n) = self.vector(id, 4)?;
        (0..n)
            .map(|i| Table::at(self.buf, follow(self.buf, start + 4 * i)?))
            .collect()
    }

    fn string(&self, id: usize) -> Res<Option<&'a str>> {
        match self.field(id)? {
            Some(p) => {
                let v = follow(self.buf, p)?;
                let n = u32_at(self.buf, v)? as usize;
                let bytes = self
                    .buf
                    .get(v + 4..(v + 4).saturating_add(n))
                    .ok_or_else(|| Problem::Bad("flatbuffer string out of range".into()))?;
                std::str::from_utf8(bytes)
                    .map(Some)
                    .map_err(|_| Problem::Bad("a name or metadata is not valid UTF-8".into()))
            }
            None => Ok(None),
        }
    }
}

// -- the flatbuffers verifier's checks --------------------------------------------------------
/// What a table's field holds, for [`verify_table`]: the checks of the flatbuffers
/// `Verifier` Arrow runs on every message before reading it (alignment, bounds, strings
/// ending in NUL, every field of every table visited), so that no metadata pyarrow refuses
/// is read here.
#[derive(Clone, Copy)]
enum Slot {
    Scalar(usize),
    Str,
    Table(&'static [Slot]),
    Tables(&'static [Slot]),
    /// a vector of scalars or structs of this size
    Vector(usize),
    /// a union whose type is the field before
    Union(fn(u8) -> Option<&'static [Slot]>),
    /// a vector of `Field` tables (a field's children: the spec refers to itself)
    Fields,
}

const KEY_VALUE: &[Slot] = &[Slot::Str, Slot::Str];
const INT: &[Slot] = &[Slot::Scalar(4), Slot::Scalar(1)];
const EMPTY: &[Slot] = &[];
const FIXED: &[Slot] = &[Slot::Scalar(4)];
const DICTIONARY: &[Slot] = &[
    Slot::Scalar(8),
    Slot::Table(INT),
    Slot::Scalar(1),
    Slot::Scalar(2),
];
const FIELD: &[Slot] = &[
    Slot::Str,
    Slot::Scalar(1),
    Slot::Scalar(1),
    Slot::Union(type_table),
    Slot::Table(DICTIONARY),
    Slot::Fields,
    Slot::Tables(KEY_VALUE),
];
const SCHEMA: &[Slot] = &[
    Slot::Scalar(2),
    Slot::Tables(FIELD),
    Slot::Tables(KEY_VALUE),
    Slot::Vector(8),
];
const COMPRESSION: &[Slot] = &[Slot::Scalar(1), Slot::Scalar(1)];
const RECORD_BATCH: &[Slot] = &[
    Slot::Scalar(8),
    Slot::Vector(16),
    Slot::Vector(16),
    Slot::Table(COMPRESSION),
    Slot::Vector(8),
];
const MESSAGE: &[Slot] = &[
    Slot::Scalar(2),
    Slot::Scalar(1),
    Slot::Union(header_table),
    Slot::Scalar(8),
    Slot::Tables(KEY_VALUE),
];

/// The Type union's tables of the types decoded here (others are refused anyway).
fn type_table(t: u8) -> Option<&'static [Slot]> {
    match t {
        2 => Some(INT),
        4..=6 => Some(EMPTY),
        15 => Some(FIXED),
        _ => None,
    }
}

fn header_table(t: u8) -> Option<&'static [Slot]> {
    match t {
        1 => Some(SCHEMA),
        3 => Some(RECORD_BATCH),
        _ => None,
    }
}

fn aligned(pos: usize, align: usize) -> Res<()> {
    if !pos.is_multiple_of(align) {
        return bad("flatbuffer misaligned");
    }
    Ok(())
}

/// Where the uoffset at `pos` points, as the verifier takes it (aligned, non-zero, inside).
fn verified_offset(buf: &[u8], pos: usize) -> Res<usize> {
    aligned(pos, 4)?;
    let o = u32_at(buf, pos)?;
    if o == 0 || (o as i32) < 0 {
        return bad("flatbuffer offset out of range");
    }
    follow(buf, pos)
}

/// A vector (or string) at `v`: its length aligned and its bytes inside; its end.
fn verified_vector(buf: &[u8], v: usize, elem: usize) -> Res<usize> {
    aligned(v, 4)?;
    let n = u32_at(buf, v)? as usize;
    match n.checked_mul(elem).and_then(|b| b.checked_add(v + 4)) {
        Some(end) if end <= buf.len() => Ok(end),
        _ => bad("flatbuffer vector out of range"),
    }
}

fn verify_table(buf: &[u8], pos: usize, spec: &[Slot], depth: usize) -> Res<()> {
    if depth > 64 {
        return bad("flatbuffer nested too deep");
    }
    aligned(pos, 4)?;
    let t = Table::at(buf, pos)?;
    aligned(t.vtable, 2)?;
    if !t.vlen.is_multiple_of(2) {
        return bad("flatbuffer vtable of odd size");
    }
    let mut last_type = 0u8;
    for (id, slot) in spec.iter().enumerate() {
        let Some(p) = t.field(id)? else {
            last_type = 0;
            continue;
        };
        match *slot {
            Slot::Scalar(size) => {
                aligned(p, size)?;
                if p + size > buf.len() {
                    return bad("flatbuffer field out of range");
                }
                if size == 1 {
                    last_type = buf[p];
                }
            }
            Slot::Str => {
                let v = verified_offset(buf, p)?;
                let end = verified_vector(buf, v, 1)?;
                if buf.get(end) != Some(&0) {
                    return bad("flatbuffer string without its NUL");
                }
            }
            Slot::Table(inner) => verify_table(buf, verified_offset(buf, p)?, inner, depth + 1)?,
            Slot::Tables(_) | Slot::Fields => {
                let inner = match *slot {
                    Slot::Tables(inner) => inner,
                    _ => FIELD,
                };
                let v = verified_offset(buf, p)?;
                verified_vector(buf, v, 4)?;
                let n = u32_at(buf, v)? as usize;
                for i in 0..n {
                    let at = verified_offset(buf, v + 4 + 4 * i)?;
                    verify_table(buf, at, inner, depth + 1)?;
                }
            }
            Slot::Vector(elem) => {
                verified_vector(buf, verified_offset(buf, p)?, elem)?;
            }
            Slot::Union(table) => {
                let at = verified_offset(buf, p)?;
                match table(last_type) {
                    Some(inner) => verify_table(buf, at, inner, depth + 1)?,
                    None => return unsupported(format!("a union member of type {last_type}")),
                }
            }
        }
    }
    Ok(())
}

// -- schema -----------------------------------------------------------------------------------
/// The column types this reader decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Int { bits: u8, signed: bool },
    Bool,
    Utf8,
    Binary,
    FixedSizeBinary(usize),
}

impl Type {
    fn buffers(self) -> usize {
        match self {
            Type::Utf8 | Type::Binary => 3,
            _ => 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: Type,
    pub nullable: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Schema {
    pub fields: Vec<Field>,
    pub metadata: Vec<(String, String)>,
}

impl Schema {
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn key_values(t: &Table<'_>, id: usize) -> Res<Vec<(String, String)>> {
    t.tables(id)?
        .iter()
        .map(|kv| {
            Ok((
                kv.string(0)?.unwrap_or("").to_string(),
                kv.string(1)?.unwrap_or("").to_string(),
            ))
        })
        .collect()
}

fn read_field(f: &Table<'_>) -> Res<Field> {
    let name = f.string(0)?.unwrap_or("").to_string();
    let nullable = f.u8(1, 0)? != 0;
    if f.field(4)?.is_some() {
        return unsupported(format!("column {name:?} is dictionary-encoded"));
    }
    if !f.tables(5)?.is_empty() {
        return unsupported(format!("column {name:?} is nested"));
    }
    let kind = f.u8(2, 0)?;
    let ty = match kind {
        2 => {
            let t = f
                .table(3)?
                .ok_or_else(|| Problem::Bad("Int type without its table".into()))?;
            let bits = t.i32(0, 0)?;
            let signed = t.u8(1, 0)? != 0;
            match bits {
                8 | 16 | 32 | 64 => Type::Int {
                    bits: bits as u8,
                    signed,
                },
                _ => return bad(format!("column {name:?}: an Int of {bits} bits")),
            }
        }
        4 => Type::Binary,
        5 => Type::Utf8,
        6 => Type::Bool,
        15 => {
            let t = f
                .table(3)?
                .ok_or_else(|| Problem::Bad("FixedSizeBinary without its table".into()))?;
            let w = t.i32(0, 0)?;
            if !(1..=1 << 16).contains(&w) {
                return bad(format!("column {name:?}: a FixedSizeBinary of width {w}"));
            }
            Type::FixedSizeBinary(w as usize)
        }
        _ => return unsupported(format!("column {name:?} of Arrow type id {kind}")),
    };
    Ok(Field { name, ty, nullable })
}

// -- messages ---------------------------------------------------------------------------------
/// One record batch of a stream: its row count, field nodes, buffers and body.
#[derive(Debug, Clone)]
pub struct BatchRef {
    pub rows: u64,
    nodes: Vec<(i64, i64)>,
    buffers: Vec<(i64, i64)>,
    compressed: bool,
    body: std::ops::Range<usize>,
}

/// A stream walked: its schema and its record batches (nothing decoded yet).
#[derive(Debug, Clone)]
pub struct Stream {
    pub schema: Schema,
    pub batches: Vec<BatchRef>,
}

impl Stream {
    pub fn rows(&self) -> u64 {
        self.batches.iter().map(|b| b.rows).sum()
    }
}

const CONTINUATION: u32 = 0xFFFF_FFFF;

/// The messages of the stream `buf`: the schema first, then record batches, then the
/// end-of-stream marker with nothing after it.
pub fn walk(buf: &[u8]) -> Res<Stream> {
    let mut pos = 0usize;
    let mut schema: Option<Schema> = None;
    let mut batches = Vec::new();
    loop {
        if pos + 8 > buf.len() {
            return bad("the stream ends without its end-of-stream marker");
        }
        if u32_at(buf, pos)? != CONTINUATION {
            return unsupported("a message without the continuation marker (pre-1.0 IPC)");
        }
        let len = u32_at(buf, pos + 4)? as i32;
        pos += 8;
        if len == 0 {
            if pos != buf.len() {
                return bad("bytes follow the end-of-stream marker");
            }
            break;
        }
        if len < 0 || pos + len as usize > buf.len() {
            return bad("a message's metadata runs past the stream");
        }
        let meta = &buf[pos..pos + len as usize];
        pos += len as usize;
        verify_table(meta, verified_offset(meta, 0)?, MESSAGE, 0)?;
        let msg = Table::root(meta)?;
        if !(3..=4).contains(&msg.i16(0, 0)?) {
            return unsupported("an IPC metadata version other than V4 and V5");
        }
        let kind = msg.u8(1, 0)?;
        let body_len = msg.i64(3, 0)?;
        if body_len < 0 || body_len as u64 > (buf.len() - pos) as u64 {
            return bad("a message's body runs past the stream");
        }
        let body = pos..pos + body_len as usize;
        pos = body.end;
        let header = msg
            .table(2)?
            .ok_or_else(|| Problem::Bad("a message without its header".into()))?;
        match (kind, &schema) {
            (1, None) => {
                if header.i16(0, 0)? != 0 {
                    return unsupported("a big-endian schema");
                }
                let fields = header
                    .tables(1)?
                    .iter()
                    .map(read_field)
                    .collect::<Res<Vec<_>>>()?;
                let metadata = key_values(&header, 2)?;
                schema = Some(Schema { fields, metadata });
            }
            (1, Some(_)) => return bad("a second schema message"),
            (_, None) => return bad("the first message is not the schema"),
            (3, Some(s)) => batches.push(batch_ref(&header, s, body)?),
            (2, Some(_)) => return unsupported("a dictionary batch"),
            _ => return bad(format!("a message of kind {kind}")),
        }
    }
    match schema {
        Some(schema) => Ok(Stream { schema, batches }),
        None => bad("the stream has no schema message"),
    }
}

fn structs(t: &Table<'_>, id: usize) -> Res<Vec<(i64, i64)>> {
    let (start, n) = t.vector(id, 16)?;
    (0..n)
        .map(|i| {
            Ok((
                i64_at(t.buf, start + 16 * i)?,
                i64_at(t.buf, start + 16 * i + 8)?,
            ))
        })
        .collect()
}

fn batch_ref(h: &Table<'_>, schema: &Schema, body: std::ops::Range<usize>) -> Res<BatchRef> {
    let rows = h.i64(0, 0)?;
    if rows < 0 {
        return bad("a record batch of negative length");
    }
    let nodes = structs(h, 1)?;
    let buffers = structs(h, 2)?;
    let compressed = match h.table(3)? {
        None => false,
        Some(c) => {
            if c.u8(0, 0)? != 1 {
                return unsupported("a body compressed with LZ4_FRAME");
            }
            if c.u8(1, 0)? != 0 {
                return bad("a body compression method other than BUFFER");
            }
            true
        }
    };
    if nodes.len() != schema.fields.len() {
        return bad("a record batch's field nodes do not match its schema");
    }
    let want: usize = schema.fields.iter().map(|f| f.ty.buffers()).sum();
    if buffers.len() != want {
        return bad("a record batch's buffers do not match its schema");
    }
    let body_len = (body.end - body.start) as i64;
    for &(off, len) in &buffers {
        if off < 0 || len < 0 || off.checked_add(len).is_none_or(|e| e > body_len) {
            return bad("a buffer lies outside its batch's body");
        }
    }
    for &(len, nulls) in &nodes {
        if len != rows || !(0..=len).contains(&nulls) {
            return bad("a field node's length or null count is out of range");
        }
    }
    Ok(BatchRef {
        rows: rows as u64,
        nodes,
        buffers,
        compressed,
        body,
    })
}

// -- decoding ---------------------------------------------------------------------------------
/// The most a compressed buffer may expand: ZSTD's own limit (docs/format.md §2).
const MAX_EXPANSION: u64 = 32_768;

/// One decoded column of a batch.
#[derive(Debug, Clone)]
pub struct Column {
    pub ty: Type,
    pub len: usize,
    validity: Option<Vec<u8>>,
    offsets: Vec<u8>,
    data: Vec<u8>,
}

fn round64(n: u64) -> u64 {
    n.div_ceil(64) * 64
}

impl Column {
    pub fn is_null(&self, i: usize) -> bool {
        match &self.validity {
            Some(v) => v.get(i / 8).is_none_or(|b| b & (1 << (i % 8)) == 0),
            None => false,
        }
    }

    pub fn null_count(&self) -> usize {
        (0..self.len).filter(|i| self.is_null(*i)).count()
    }

    /// An unsigned integer value (any width; signed widths reinterpret).
    pub fn uint(&self, i: usize) -> u64 {
        let w = match self.ty {
            Type::Int { bits, .. } => bits as usize / 8,
            _ => return 0,
        };
        let mut b = [0u8; 8];
        if let Some(s) = self.data.get(i * w..i * w + w) {
            b[..w].copy_from_slice(s);
        }
        u64::from_le_bytes(b)
    }

    pub fn int8(&self, i: usize) -> i8 {
        self.data.get(i).map_or(0, |b| *b as i8)
    }

    pub fn bool(&self, i: usize) -> bool {
        self.data
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// The bytes of value `i` of a Utf8, Binary or FixedSizeBinary column.
    pub fn bytes(&self, i: usize) -> &[u8] {
        match self.ty {
            Type::FixedSizeBinary(w) => self.data.get(i * w..i * w + w).unwrap_or(&[]),
            _ => {
                let (a, b) = (self.offset(i), self.offset(i + 1));
                self.data.get(a..b).unwrap_or(&[])
            }
        }
    }

    pub fn str(&self, i: usize) -> &str {
        std::str::from_utf8(self.bytes(i)).unwrap_or("")
    }

    fn offset(&self, i: usize) -> usize {
        self.offsets
            .get(i * 4..i * 4 + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    /// Checked once when decoded: offsets monotone inside the data, UTF-8, widths.
    fn validate(&self, name: &str) -> Res<()> {
        let n = self.len;
        let need = match self.ty {
            Type::Int { bits, .. } => n * (bits as usize / 8),
            Type::Bool => n.div_ceil(8),
            Type::FixedSizeBinary(w) => n * w,
            Type::Utf8 | Type::Binary => 0,
        };
        if self.data.len() < need {
            return bad(format!("column {name:?}: its data buffer is too short"));
        }
        if let Some(v) = &self.validity {
            if v.len() < n.div_ceil(8) {
                return bad(format!("column {name:?}: its validity bitmap is too short"));
            }
        }
        if matches!(self.ty, Type::Utf8 | Type::Binary) {
            if self.offsets.len() < (n + 1) * 4 {
                return bad(format!("column {name:?}: its offsets are too short"));
            }
            let mut last = self.offset(0);
            for i in 1..=n {
                let o = self.offset(i);
                if (o as i32) < 0 || o < last || o > self.data.len() {
                    return bad(format!("column {name:?}: its offsets are not monotone"));
                }
                last = o;
            }
            if self.ty == Type::Utf8 {
                let (a, b) = (self.offset(0), self.offset(n));
                let text = std::str::from_utf8(&self.data[a..b])
                    .map_err(|_| Problem::Bad(format!("column {name:?}: invalid UTF-8")))?;
                for i in 0..=n {
                    if !text.is_char_boundary(self.offset(i) - a) {
                        return bad(format!("column {name:?}: invalid UTF-8"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The columns of one record batch, decoded (decompressed) and validated; a non-nullable
/// column must hold no nulls.
pub fn decode(stream_bytes: &[u8], schema: &Schema, b: &BatchRef) -> Res<Vec<Column>> {
    let body = &stream_bytes[b.body.clone()];
    let mut k = 0usize;
    let mut out = Vec::with_capacity(schema.fields.len());
    let mut total = 0u64;
    for (field, &(len, nulls)) in schema.fields.iter().zip(&b.nodes) {
        let n = len as u64;
        // what each buffer may hold at most: validity, (offsets,) data
        let limits: Vec<Option<u64>> = match field.ty {
            Type::Utf8 | Type::Binary => vec![Some(n.div_ceil(8)), Some((n + 1) * 4), None],
            Type::Int { bits, .. } => vec![Some(n.div_ceil(8)), Some(n * bits as u64 / 8)],
            Type::Bool => vec![Some(n.div_ceil(8)), Some(n.div_ceil(8))],
            Type::FixedSizeBinary(w) => vec![Some(n.div_ceil(8)), Some(n * w as u64)],
        };
        let mut bufs = Vec::with_capacity(limits.len());
        for limit in limits {
            let (off, blen) = b.buffers[k];
            k += 1;
            let raw = &body[off as usize..(off + blen) as usize];
            let data = if b.compressed && !raw.is_empty() {
                inflate(raw, limit, &field.name, &mut total, body.len() as u64)?
            } else {
                raw.to_vec()
            };
            bufs.push(data);
        }
        let mut it = bufs.into_iter();
        let validity = it.next().unwrap_or_default();
        let (offsets, data) = match field.ty {
            Type::Utf8 | Type::Binary => (it.next().unwrap_or_default(), it.next()),
            _ => (Vec::new(), it.next()),
        };
        if nulls > 0 && !field.nullable {
            return bad(format!("non-nullable column {:?} holds nulls", field.name));
        }
        let col = Column {
            ty: field.ty,
            len: len as usize,
            validity: if nulls > 0 { Some(validity) } else { None },
            offsets,
            data: data.unwrap_or_default(),
        };
        col.validate(&field.name)?;
        if nulls > 0 && col.null_count() != nulls as usize {
            return bad(format!(
                "column {:?}: its null count is not its bitmap's",
                field.name
            ));
        }
        out.push(col);
    }
    Ok(out)
}

/// One compressed buffer: its declared length bounded by the column and by ZSTD's ratio
/// before anything is allocated, then decoded to exactly that length.
fn inflate(raw: &[u8], limit: Option<u64>, name: &str, total: &mut u64, body: u64) -> Res<Vec<u8>> {
    if raw.len() < 8 {
        return bad(format!(
            "column {name:?}: a compressed buffer without its length"
        ));
    }
    let declared = i64::from_le_bytes(raw[..8].try_into().unwrap_or([0; 8]));
    let payload = &raw[8..];
    if declared == -1 {
        return Ok(payload.to_vec());
    }
    let declared = declared as u64; // a negative length other than -1 is refused below
    let stored = payload.len() as u64;
    if limit.is_some_and(|l| declared > round64(l))
        || declared > stored.saturating_mul(MAX_EXPANSION)
    {
        return bad(format!(
            "column {name:?}: a compressed buffer declares {declared} bytes, more than it can hold"
        ));
    }
    *total += declared;
    if *total > body.saturating_mul(256) + (64 << 10) {
        return bad("a compressed batch declares more than 256 times its body");
    }
    let out = zstd::bulk::decompress(payload, declared as usize)
        .map_err(|e| Problem::Bad(format!("column {name:?}: not a valid zstd buffer ({e})")))?;
    if out.len() as u64 != declared {
        return bad(format!(
            "column {name:?}: a compressed buffer decodes to {} bytes, not the {declared} it declares",
            out.len()
        ));
    }
    Ok(out)
}

/// The whole stream as one batch of columns (batches concatenated), for small streams.
pub fn read_all(buf: &[u8]) -> Res<(Schema, Vec<Vec<Column>>)> {
    let stream = walk(buf)?;
    let batches = stream
        .batches
        .iter()
        .map(|b| decode(buf, &stream.schema, b))
        .collect::<Res<Vec<_>>>()?;
    Ok((stream.schema, batches))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &[u8] = include_bytes!("../../tests/data/golden-v6-default.znippy");

    /// The golden's manifest, then the range of its `__lookup__` (a compressed stream).
    fn lookup_range() -> std::ops::Range<usize> {
        let n = GOLDEN.len();
        let at = u64::from_le_bytes(GOLDEN[n - 8..].try_into().unwrap()) as usize;
        let (schema, batches) = read_all(&GOLDEN[at..n - 16]).unwrap();
        assert_eq!(schema.fields[0].name, "pkg_type");
        assert!(schema.meta("znippy.section_blake3").is_some());
        let cols = &batches[0];
        let i = (0..cols[0].len)
            .find(|i| cols[2].str(*i) == "__lookup__")
            .unwrap();
        let (off, len) = (cols[3].uint(i) as usize, cols[4].uint(i) as usize);
        off..off + len
    }

    #[test]
    fn the_golden_lookup_is_read() {
        let bytes = &GOLDEN[lookup_range()];
        let stream = walk(bytes).unwrap();
        assert!(stream.batches.iter().all(|b| b.compressed));
        let cols = decode(bytes, &stream.schema, &stream.batches[0]).unwrap();
        assert_eq!(cols[0].str(0), "README.txt");
        assert_eq!(stream.rows(), 75);
    }

    #[test]
    fn a_lying_buffer_length_is_refused_before_anything_is_allocated() {
        let range = lookup_range();
        let stream = walk(&GOLDEN[range.clone()]).unwrap();
        let b = &stream.batches[0];
        let (off, len) = *b.buffers.iter().find(|(_, l)| *l > 8).unwrap();
        let mut bytes = GOLDEN[range].to_vec();
        let at = b.body.start + off as usize;
        bytes[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let err = decode(&bytes, &stream.schema, b).unwrap_err();
        assert!(
            matches!(err, Problem::Bad(m) if m.contains("declares")),
            "{len}"
        );
    }

    #[test]
    fn cut_or_trailing_bytes_are_refused() {
        let bytes = &GOLDEN[lookup_range()];
        assert!(matches!(
            walk(&bytes[..bytes.len() - 8]),
            Err(Problem::Bad(_))
        ));
        let mut more = bytes.to_vec();
        more.push(0);
        assert!(matches!(walk(&more), Err(Problem::Bad(_))));
        assert!(walk(&[0xff; 7]).is_err());
    }
}
