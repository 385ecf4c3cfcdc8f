//! The two OpenZL frame shapes this project's writer produces (`format/zlframe.py`,
//! docs/format.md §6), recognised and decoded with the `zstd` crate:
//!
//! ```text
//! zstd shape:   c8 a5 b1 d7 | n: u32 LE | 01 01 00 00 16 00 00 00 | LEB128(len(z)+1) | 01 | z
//! stored shape: c8 a5 b1 d7 | n: u32 LE | 00 01 00 | LEB128(n) | the n bytes
//! ```
//!
//! Any other frame (another graph, format version or writer: the Rust tool's) is not one of
//! them: [`parse`] says None and the caller leaves the chunk to the OpenZL binding.

use std::io::Read;

const MAGIC_V8: [u8; 4] = [0xc8, 0xa5, 0xb1, 0xd7];
const ZSTD_SHAPE: [u8; 8] = [1, 1, 0, 0, 0x16, 0, 0, 0];
const STORE_SHAPE: [u8; 3] = [0, 1, 0];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Which shape a frame is, and where its payload starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// a zstd frame from this offset to the end
    Zstd(usize),
    /// the chunk's bytes from this offset to the end
    Stored(usize),
}

fn leb128(b: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let (mut value, mut shift) = (0u64, 0u32);
    for _ in 0..10 {
        let byte = *b.get(pos)?;
        value |= ((byte & 0x7f) as u64) << shift;
        pos += 1;
        if byte < 0x80 {
            return Some((value, pos));
        }
        shift += 7;
    }
    None
}

/// The chunk size an OpenZL frame of our shapes declares (its u32 after the magic).
pub fn declared(head: &[u8]) -> Option<u64> {
    if head.len() < 8 || head[..4] != MAGIC_V8 {
        return None;
    }
    Some(u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as u64)
}

/// The shape of `frame` (its first bytes `head`, its whole length `len`) for a chunk of
/// `expected` bytes, as `zlframe.parse` decides it; None for any other frame. The zstd
/// frame's own content size must be `expected` too (never allocate by an unchecked one).
pub fn parse(head: &[u8], len: usize, expected: u64) -> Option<Shape> {
    if expected > u32::MAX as u64 || head.len() < 12 || declared(head)? != expected {
        return None;
    }
    if head.len() >= 16 && head[8..16] == ZSTD_SHAPE {
        let (length, pos) = leb128(head, 16)?;
        if length < 1 || pos as u64 + length != len as u64 {
            return None;
        }
        if head.get(pos..pos + 5)?
            != [
                1,
                ZSTD_MAGIC[0],
                ZSTD_MAGIC[1],
                ZSTD_MAGIC[2],
                ZSTD_MAGIC[3],
            ]
        {
            return None;
        }
        let size = zstd::zstd_safe::get_frame_content_size(&head[pos + 1..]).ok()??;
        return (size == expected).then_some(Shape::Zstd(pos + 1));
    }
    if head[8..11] == STORE_SHAPE {
        let (length, pos) = leb128(head, 11)?;
        if length != expected || pos as u64 + length != len as u64 {
            return None;
        }
        return Some(Shape::Stored(pos));
    }
    None
}

/// The first `upto` bytes (all `n` when `upto >= n`) the frame `frame` of shape `shape`
/// decodes to; Err: zstd refuses it, or it holds another size.
pub fn decode(frame: &[u8], shape: Shape, n: u64, upto: u64) -> Result<Vec<u8>, String> {
    match shape {
        Shape::Stored(pos) => {
            let end = pos + upto.min(n) as usize;
            frame
                .get(pos..end)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| "frame too short".into())
        }
        Shape::Zstd(pos) if upto >= n => {
            let out = zstd::bulk::decompress(&frame[pos..], n as usize)
                .map_err(|e| format!("not a valid zstd frame ({e})"))?;
            if out.len() as u64 != n {
                return Err(format!("decoded {} bytes, index says {n}", out.len()));
            }
            Ok(out)
        }
        Shape::Zstd(pos) => {
            let mut out = Vec::with_capacity(upto as usize);
            let reader = zstd::stream::read::Decoder::with_buffer(&frame[pos..])
                .map_err(|e| format!("not a valid zstd frame ({e})"))?;
            reader
                .take(upto)
                .read_to_end(&mut out)
                .map_err(|e| format!("not a valid zstd frame ({e})"))?;
            if (out.len() as u64) < upto {
                return Err(format!("decoded {} bytes, {upto} needed", out.len()));
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zstd_frame(chunk: &[u8]) -> Vec<u8> {
        let z = zstd::bulk::compress(chunk, 3).unwrap();
        let mut f = MAGIC_V8.to_vec();
        f.extend((chunk.len() as u32).to_le_bytes());
        f.extend(ZSTD_SHAPE);
        let mut l = z.len() as u64 + 1;
        while l >= 0x80 {
            f.push((l as u8 & 0x7f) | 0x80);
            l >>= 7;
        }
        f.push(l as u8);
        f.push(1);
        f.extend(z);
        f
    }

    #[test]
    fn zstd_shape_round_trips() {
        let chunk: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let f = zstd_frame(&chunk);
        let shape = parse(&f[..64], f.len(), chunk.len() as u64).unwrap();
        assert_eq!(
            decode(&f, shape, chunk.len() as u64, u64::MAX).unwrap(),
            chunk
        );
        assert_eq!(
            decode(&f, shape, chunk.len() as u64, 1000).unwrap(),
            &chunk[..1000]
        );
        assert_eq!(parse(&f[..64], f.len(), 5), None);
        assert_eq!(parse(&f[..64], f.len() + 1, chunk.len() as u64), None);
    }

    #[test]
    fn stored_shape_is_its_bytes() {
        let mut f = MAGIC_V8.to_vec();
        f.extend(3u32.to_le_bytes());
        f.extend(STORE_SHAPE);
        f.extend([3, b'a', b'b', b'c']);
        let shape = parse(&f, f.len(), 3).unwrap();
        assert_eq!(decode(&f, shape, 3, 3).unwrap(), b"abc");
    }
}
