//! Pack primitives: entry headers, git's offset varint, exact inflate, delta apply, object ids.
//! Layout: git's `Documentation/gitformat-pack.txt` (and docs/git-sections.md).

use flate2::{Decompress, FlushDecompress, Status};
use sha1::{Digest, Sha1};

pub const COMMIT: u8 = 1;
pub const TREE: u8 = 2;
pub const BLOB: u8 = 3;
pub const TAG: u8 = 4;
pub const OFS_DELTA: u8 = 6;
pub const REF_DELTA: u8 = 7;
pub const HEADER_LEN: usize = 12;
pub const TRAILER_LEN: usize = 20;
pub const OID: usize = 20;

pub fn type_name(kind: u8) -> &'static [u8] {
    match kind {
        COMMIT => b"commit",
        TREE => b"tree",
        BLOB => b"blob",
        TAG => b"tag",
        _ => b"?",
    }
}

/// git's object id: SHA-1 of `"<type> <size>\0" + content`.
pub fn object_id(kind: u8, content: &[u8]) -> [u8; OID] {
    let mut h = Sha1::new();
    h.update(type_name(kind));
    h.update(format!(" {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize().into()
}

/// SHA-1 of a buffer.
pub fn sha1(data: &[u8]) -> [u8; OID] {
    Sha1::digest(data).into()
}

/// `(type, size, position after the varint)` of the entry header at `pos` (`None`: it runs
/// past `end`, or its size does not fit 64 bits).
pub fn entry_header(data: &[u8], mut pos: usize, end: usize) -> Option<(u8, u64, usize)> {
    if pos >= end {
        return None;
    }
    let mut c = data[pos];
    let kind = (c >> 4) & 7;
    let mut size = u64::from(c & 15);
    let mut shift = 4u32;
    pos += 1;
    while c & 0x80 != 0 {
        if pos >= end || shift > 63 {
            return None;
        }
        c = data[pos];
        size |= u64::from(c & 0x7F).checked_shl(shift).unwrap_or(0);
        shift += 7;
        pos += 1;
    }
    Some((kind, size, pos))
}

/// OFS_DELTA's base distance (git's offset encoding) and the position after it.
pub fn ofs_distance(data: &[u8], mut pos: usize, end: usize) -> Option<(u64, usize)> {
    if pos >= end {
        return None;
    }
    let mut c = data[pos];
    let mut dist = u64::from(c & 0x7F);
    pos += 1;
    while c & 0x80 != 0 {
        if pos >= end || dist > 1 << 56 {
            return None;
        }
        c = data[pos];
        dist = ((dist + 1) << 7) | u64::from(c & 0x7F);
        pos += 1;
    }
    Some((dist, pos))
}

/// Why a zlib stream did not inflate as its entry says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InflateError {
    Truncated,
    TooLong(u64),
    WrongSize(usize, u64),
    Zlib(String),
}

impl std::fmt::Display for InflateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InflateError::Truncated => f.write_str("zlib stream is truncated"),
            InflateError::TooLong(size) => {
                write!(f, "inflates to more than the {size} bytes its header says")
            }
            InflateError::WrongSize(got, size) => {
                write!(f, "inflates to {got} bytes, its header says {size}")
            }
            InflateError::Zlib(why) => write!(f, "bad zlib stream ({why})"),
        }
    }
}

/// The zlib stream at the start of `input` inflated to exactly `size` bytes, and how many
/// input bytes it used. The output never grows past `size + 1` bytes, whatever the header
/// claims (a zlib stream gives at most ~1032 bytes per input byte).
pub fn inflate(
    d: &mut Decompress,
    input: &[u8],
    size: u64,
) -> Result<(Vec<u8>, usize), InflateError> {
    d.reset(true);
    let limit = usize::try_from(size)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let first = limit.min(input.len().saturating_mul(1040).saturating_add(64));
    let mut out: Vec<u8> = Vec::with_capacity(first);
    loop {
        let used = d.total_in() as usize;
        let had = out.len();
        let status = d
            .decompress_vec(&input[used..], &mut out, FlushDecompress::None)
            .map_err(|e| InflateError::Zlib(e.to_string()))?;
        if out.len() > limit - 1 {
            return Err(InflateError::TooLong(size));
        }
        if status == Status::StreamEnd {
            break;
        }
        if out.len() == out.capacity() {
            let more = out.len().max(4096).min(limit - out.len());
            out.reserve_exact(more);
        } else if d.total_in() as usize >= input.len()
            || (d.total_in() as usize == used && out.len() == had)
        {
            return Err(InflateError::Truncated);
        }
    }
    if out.len() as u64 != size {
        return Err(InflateError::WrongSize(out.len(), size));
    }
    Ok((out, d.total_in() as usize))
}

/// A zlib stream that must be exactly `input` (it ends with its entry) and inflate to at
/// most `size` bytes; `None` when it does not.
pub fn inflate_whole(d: &mut Decompress, input: &[u8], size: u64) -> Option<Vec<u8>> {
    match inflate(d, input, size) {
        Ok((out, used)) if used == input.len() => Some(out),
        _ => None,
    }
}

/// The two size varints at the start of a delta (little-endian base-128).
fn delta_varint(delta: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    let mut shift = 0u32;
    loop {
        let c = *delta.get(*pos).ok_or("delta header runs past its end")?;
        *pos += 1;
        if shift > 63 {
            return Err("delta size does not fit 64 bits".into());
        }
        value |= u64::from(c & 0x7F) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// git's delta instructions applied to `base`: the target's bytes, checked against both
/// sizes the delta states.
pub fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, String> {
    let mut pos = 0usize;
    let src = delta_varint(delta, &mut pos)?;
    let dst = delta_varint(delta, &mut pos)?;
    if src != base.len() as u64 {
        return Err(format!(
            "the delta is for a base of {src} bytes, the base has {}",
            base.len()
        ));
    }
    let cap = usize::try_from(dst)
        .unwrap_or(usize::MAX)
        .min(base.len().saturating_mul(4) + delta.len() * 128);
    let mut out: Vec<u8> = Vec::with_capacity(cap);
    while pos < delta.len() {
        let cmd = delta[pos];
        pos += 1;
        if cmd & 0x80 != 0 {
            let mut offset = 0usize;
            let mut len = 0usize;
            for bit in 0..4 {
                if cmd & (1 << bit) != 0 {
                    let b = *delta
                        .get(pos)
                        .ok_or("copy instruction runs past the delta")?;
                    offset |= usize::from(b) << (8 * bit);
                    pos += 1;
                }
            }
            for bit in 0..3 {
                if cmd & (0x10 << bit) != 0 {
                    let b = *delta
                        .get(pos)
                        .ok_or("copy instruction runs past the delta")?;
                    len |= usize::from(b) << (8 * bit);
                    pos += 1;
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            let stop = offset.checked_add(len).filter(|&s| s <= base.len());
            let stop = stop.ok_or("copy instruction reads past the base")?;
            out.extend_from_slice(&base[offset..stop]);
        } else if cmd != 0 {
            let n = usize::from(cmd);
            let data = delta
                .get(pos..pos + n)
                .ok_or("insert instruction runs past the delta")?;
            out.extend_from_slice(data);
            pos += n;
        } else {
            return Err("delta has the reserved instruction 0".into());
        }
        if out.len() as u64 > dst {
            return Err(format!("the delta makes more than the {dst} bytes it says"));
        }
    }
    if out.len() as u64 != dst {
        return Err(format!(
            "the delta makes {} bytes, it says {dst}",
            out.len()
        ));
    }
    Ok(out)
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Python's `repr` of a short bytes value (for messages that name bad magic).
pub fn bytes_repr(bytes: &[u8]) -> String {
    let mut s = String::from("b'");
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'\'' => s.push_str("\\'"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('\'');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::ZlibEncoder;
    use flate2::Compression;
    use std::io::Write;

    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn varints() {
        // type 3, size 0x1234: 1 0011 0100 | 0x91 -> low 4 bits 4, then 0x123
        let data = [0xB4, 0xA3, 0x02];
        assert_eq!(
            entry_header(&data, 0, 3),
            Some((3, 0x4 | (0x23 << 4) | (0x02 << 11), 3))
        );
        assert_eq!(entry_header(&data, 0, 2), None);
        assert_eq!(entry_header(&[0x35], 0, 1), Some((3, 5, 1)));
        // git's offset encoding: 0x81 0x00 = ((1 + 1) << 7) | 0 = 256
        assert_eq!(ofs_distance(&[0x81, 0x00], 0, 2), Some((256, 2)));
        assert_eq!(ofs_distance(&[0x7F], 0, 1), Some((127, 1)));
        assert_eq!(ofs_distance(&[0x81], 0, 1), None);
        let mut long = vec![0xFF; 12];
        long.push(0);
        assert_eq!(entry_header(&long, 0, long.len()), None);
    }

    #[test]
    fn delta_apply() {
        let base = b"hello, world of deltas";
        // src 22, dst 12, copy offset 7 len 5 ("world"), insert "!!", copy 0 len 5
        let delta = [22, 12, 0x91, 7, 5, 2, b'!', b'!', 0x90, 5];
        assert_eq!(apply_delta(base, &delta).unwrap(), b"world!!hello");
        assert!(apply_delta(b"short", &delta).is_err());
        assert!(apply_delta(base, &[22, 12, 0x91, 20, 5]).is_err()); // past the base
        assert!(apply_delta(base, &[22, 3, 0]).is_err()); // reserved instruction
        assert!(apply_delta(base, &[22, 3, 2, b'a', b'b']).is_err()); // 2 bytes, says 3
                                                                      // a size 0 copy means 0x10000
        let big = vec![7u8; 0x10000];
        let d = [0x80, 0x80, 0x04, 0x80, 0x80, 0x04, 0x80];
        assert_eq!(apply_delta(&big, &d).unwrap().len(), 0x10000);
    }

    #[test]
    fn inflate_exact() {
        let z = deflate(b"abcabcabc");
        let mut d = Decompress::new(true);
        let mut padded = z.clone();
        padded.extend_from_slice(b"next entry");
        assert_eq!(
            inflate(&mut d, &padded, 9).unwrap(),
            (b"abcabcabc".to_vec(), z.len())
        );
        assert_eq!(inflate(&mut d, &z, 8), Err(InflateError::TooLong(8)));
        assert_eq!(inflate(&mut d, &z, 10), Err(InflateError::WrongSize(9, 10)));
        assert_eq!(
            inflate(&mut d, &z[..z.len() - 3], 9),
            Err(InflateError::Truncated)
        );
        assert!(matches!(
            inflate(&mut d, b"garbage!", 9),
            Err(InflateError::Zlib(_))
        ));
        assert!(inflate_whole(&mut d, &padded, 9).is_none());
        assert_eq!(inflate_whole(&mut d, &z, 9).unwrap(), b"abcabcabc");
        // a header claiming far more than the stream holds allocates by the stream
        assert!(matches!(
            inflate(&mut d, &z, u64::MAX),
            Err(InflateError::WrongSize(9, _))
        ));
    }

    #[test]
    fn ids() {
        assert_eq!(
            hex(&object_id(BLOB, b"")),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
        assert_eq!(bytes_repr(b"PAC\x00"), "b'PAC\\x00'");
    }
}
