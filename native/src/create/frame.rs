//! The OpenZL frame of the `zstd` graph that our writer's choices produce (format version 8,
//! one serial input, no frame checksums), built around a zstd frame from the `zstd` crate:
//! byte for byte what `format/zlframe.py` writes (`tests/test_create_native.py` compares
//! them at every level, for the three parameter sets below).
//!
//! `c8 a5 b1 d7` · u32le `n` · `01 01 00 00 16 00 00 00` · LEB128(len(z) + 1) · `01` · `z`

use zstd_safe::{CCtx, CParameter};

const MAGIC_V8: [u8; 4] = [0xc8, 0xa5, 0xb1, 0xd7];
const ZSTD_SHAPE: [u8; 8] = [0x01, 0x01, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00];

/// Which zstd parameters: the level's own (chunks), the level's with smaller hash and chain
/// tables (packed blobs, `codec.PACK_HASH_LOG`), or with a long window and long-distance
/// matching (directory packs, `codec.LONG_WINDOW_LOG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Params {
    Level,
    Tables { hash_log: u32, chain_log: u32 },
    Long { window_log: u32 },
}

pub fn leb128(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// zstd frames of one level and parameter set, wrapped as OpenZL frames.
pub struct Encoder {
    cctx: CCtx<'static>,
    z: Vec<u8>,
}

fn set(cctx: &mut CCtx<'static>, p: CParameter) -> Result<(), String> {
    cctx.set_parameter(p).map(|_| ()).map_err(|code| {
        format!(
            "zstd refused a parameter: {}",
            zstd_safe::get_error_name(code)
        )
    })
}

impl Encoder {
    pub fn new(level: i32, params: Params) -> Result<Self, String> {
        let mut cctx = CCtx::try_create().ok_or("zstd could not make a context")?;
        match params {
            Params::Level => set(&mut cctx, CParameter::CompressionLevel(level))?,
            Params::Tables { .. } | Params::Long { .. } => {
                // As python-zstandard's `ZstdCompressionParameters.from_level(level, ...)`:
                // every parameter of the level for an unknown size, set explicitly, with
                // the given ones instead; the compression level itself left at 0 (default).
                // SAFETY: ZSTD_getCParams is a pure function of its integer arguments.
                let cp = unsafe { zstd_safe::zstd_sys::ZSTD_getCParams(level, 0, 0) };
                let (mut window, mut hash, mut chain) = (cp.windowLog, cp.hashLog, cp.chainLog);
                let mut long = false;
                match params {
                    Params::Tables {
                        hash_log,
                        chain_log,
                    } => {
                        hash = hash_log;
                        chain = chain_log;
                    }
                    Params::Long { window_log } => {
                        window = window_log;
                        long = true;
                    }
                    Params::Level => {}
                }
                set(&mut cctx, CParameter::CompressionLevel(0))?;
                set(&mut cctx, CParameter::WindowLog(window))?;
                set(&mut cctx, CParameter::HashLog(hash))?;
                set(&mut cctx, CParameter::ChainLog(chain))?;
                set(&mut cctx, CParameter::SearchLog(cp.searchLog))?;
                set(&mut cctx, CParameter::MinMatch(cp.minMatch))?;
                set(&mut cctx, CParameter::TargetLength(cp.targetLength))?;
                let strategy = cp.strategy as u32;
                set(&mut cctx, CParameter::Strategy(strategy_of(strategy)))?;
                if long {
                    set(&mut cctx, CParameter::EnableLongDistanceMatching(true))?;
                }
            }
        }
        set(&mut cctx, CParameter::ContentSizeFlag(true))?;
        set(&mut cctx, CParameter::ChecksumFlag(false))?;
        set(&mut cctx, CParameter::DictIdFlag(false))?;
        Ok(Encoder {
            cctx,
            z: Vec::new(),
        })
    }

    /// Appends the chunk's OpenZL frame to `out` and returns true, or returns false (and
    /// appends nothing) when the frame would not be smaller than the chunk.
    pub fn frame_if_smaller(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        let n = chunk.len();
        self.z.clear();
        self.z.reserve(zstd_safe::compress_bound(n));
        self.cctx
            .compress2(&mut self.z, chunk)
            .map_err(|code| format!("zstd failed: {}", zstd_safe::get_error_name(code)))?;
        let mut head = Vec::with_capacity(32);
        head.extend_from_slice(&MAGIC_V8);
        head.extend_from_slice(&(n as u32).to_le_bytes());
        head.extend_from_slice(&ZSTD_SHAPE);
        leb128(self.z.len() as u64 + 1, &mut head);
        head.push(0x01);
        if head.len() + self.z.len() >= n {
            return Ok(false);
        }
        out.extend_from_slice(&head);
        out.extend_from_slice(&self.z);
        Ok(true)
    }
}

fn strategy_of(value: u32) -> zstd_safe::Strategy {
    use zstd_safe::Strategy::*;
    match value {
        1 => ZSTD_fast,
        2 => ZSTD_dfast,
        3 => ZSTD_greedy,
        4 => ZSTD_lazy,
        5 => ZSTD_lazy2,
        6 => ZSTD_btlazy2,
        7 => ZSTD_btopt,
        8 => ZSTD_btultra,
        _ => ZSTD_btultra2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb128_of_frame_lengths() {
        let mut out = Vec::new();
        leb128(0x7f, &mut out);
        leb128(0x80, &mut out);
        leb128(300, &mut out);
        assert_eq!(out, vec![0x7f, 0x80, 0x01, 0xac, 0x02]);
    }

    #[test]
    fn a_frame_round_trips_through_zstd() {
        let chunk = b"hello hello hello hello hello hello hello hello".repeat(20);
        for params in [
            Params::Level,
            Params::Tables {
                hash_log: 16,
                chain_log: 15,
            },
            Params::Long { window_log: 25 },
        ] {
            let mut enc = Encoder::new(3, params).unwrap();
            let mut out = Vec::new();
            assert!(enc.frame_if_smaller(&chunk, &mut out).unwrap());
            assert_eq!(&out[..4], &MAGIC_V8);
            let at = if out[16] < 0x80 { 18 } else { 19 };
            let back = zstd_safe::decompress(&mut vec![0u8; chunk.len()], &out[at..]).unwrap();
            assert_eq!(back, chunk.len());
        }
        let mut enc = Encoder::new(3, Params::Level).unwrap();
        let mut out = Vec::new();
        assert!(!enc.frame_if_smaller(b"abc", &mut out).unwrap());
        assert!(out.is_empty());
    }
}
