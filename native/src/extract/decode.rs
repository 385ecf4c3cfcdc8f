//! Write and decode: every chunk of a file read, decoded (a pack once per worker, members
//! sliced at `inner_offset`; a big chunk streamed in pieces), checked against its BLAKE3 and
//! written at its position.

use super::*;

/// A compressed chunk that decodes to more than this is streamed (`codec.STREAM_BYTES`).
pub(super) const STREAM_BYTES: u64 = 64 << 20;
/// Pieces of a streamed chunk, or of a raw one (`codec.PIECE_BYTES`).
pub(super) const PIECE_BYTES: usize = 8 << 20;
/// A worker keeps its last decoded packs up to this many bytes (and the one in use).
pub(super) const PACK_CACHE_BYTES: usize = 16 << 20;
/// A worker keeps its read and decode buffers between chunks up to this many bytes.
pub(super) const KEEP_BYTES: usize = 16 << 20;
/// A pack buffer up to this size (a directory pack's most) is kept for the next pack.
pub(super) const SPARE_BYTES: usize = 32 << 20;

impl Job {
    /// Decode `frame` (a chunk of `n` bytes, or, `n` None, what the frame declares) into
    /// `out` (a worker's buffer, reused: a fresh one per frame would be page-faulted in each
    /// time); a zstd frame of our shape with the worker's context `dctx` (made once: a
    /// context per frame would allocate and clear its window each time).
    pub(super) fn decode(
        &self,
        dctx: Option<&mut Dctx>,
        frame: &[u8],
        n: Option<u64>,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        out.clear();
        let want = n.or_else(|| frame::declared(frame));
        if let Some(want) = want {
            let head = &frame[..frame.len().min(64)];
            match (frame::parse(head, frame.len(), want), dctx) {
                (Some(Shape::Zstd(pos)), Some(dctx)) => {
                    if dctx.is_none() {
                        *dctx = Some(
                            zstd::bulk::Decompressor::new()
                                .map_err(|e| format!("no zstd context ({e})"))?,
                        );
                    }
                    out.reserve(want as usize);
                    // into the spare capacity: no zero-filling first
                    dctx.as_mut()
                        .ok_or("no zstd context")?
                        .decompress_to_buffer(&frame[pos..], out)
                        .map_err(|e| format!("not a valid zstd frame ({e})"))?;
                    if out.len() as u64 != want {
                        return Err(format!("decoded {} bytes, index says {want}", out.len()));
                    }
                    return Ok(());
                }
                (Some(shape), _) => {
                    *out = frame::decode(frame, shape, want, u64::MAX)?;
                    return Ok(());
                }
                (None, _) => {}
            }
        }
        *out = Python::attach(|py| {
            let got = self
                .decode
                .call1(py, (PyBytes::new(py, frame), n.map_or(-1i64, |v| v as i64)))
                .map_err(|e| py_problem(py, e))?;
            buffer_vec(got.bind(py)).map_err(|e| py_problem(py, e))
        })?;
        Ok(())
    }

    /// Every chunk of the file, decoded, checked and written in order; the bytes written.
    pub(super) fn fill(
        &self,
        w: &mut Worker,
        item: &Item<'_>,
        rows: std::ops::Range<usize>,
        file: &File,
    ) -> Result<u64, Fail> {
        let out = &mut Out {
            file,
            buf: Vec::new(),
            at: 0,
        };
        self.fill_into(w, item, rows, out)
    }

    /// Every chunk of the file, decoded, checked (unless the job does not check) and put
    /// into `out` (a file, or memory: `read_many`) in order; the bytes put.
    pub(super) fn fill_into(
        &self,
        w: &mut Worker,
        item: &Item<'_>,
        rows: std::ops::Range<usize>,
        out: &mut dyn Sink,
    ) -> Result<u64, Fail> {
        let c = &self.cols;
        let mut total = 0u64;
        for r in rows.clone() {
            if self.stopped() {
                return Err(Fail::Stopped);
            }
            let here = || format!("{} chunk {}: ", py_repr(&item.path), c.seq[r]);
            let mut pos = c.fdata[r];
            let bad = |m: String| Fail::File(format!("{}{m}", here()));
            let last = r + 1 == rows.end;
            let (b, s, u) = (c.blob_offset[r], c.blob_size[r], c.size[r]);
            let end = b.checked_add(s);
            if end.is_none_or(|e| e > self.tail) {
                return Err(bad(format!(
                    "blob [{b}, {}) runs into the index tail at {}",
                    b as u128 + s as u128,
                    self.tail
                )));
            }
            let sum = &c.checksum[r * 32..r * 32 + 32];
            let compressed = c.compressed[r] != 0;
            let mut hasher = blake3::Hasher::new();
            if compressed && self.packed {
                let key = (b, s);
                if let Some(at) = w.packs.iter().position(|(k, _)| *k == key) {
                    let hit = w.packs.remove(at);
                    w.packs.push(hit);
                } else {
                    let frame = self.read(&mut w.rbuf, &w.fetched, b, s).map_err(&bad)?;
                    let declared = match frame::declared(frame) {
                        Some(n)
                            if frame::parse(&frame[..frame.len().min(64)], frame.len(), n)
                                .is_some() =>
                        {
                            Some(n)
                        }
                        _ => None,
                    };
                    if let Some(n) = declared.filter(|n| *n > MAX_CHUNK_BYTES) {
                        return Err(bad(format!(
                            "blob declares {n} bytes, more than the {MAX_CHUNK_BYTES}-byte limit"
                        )));
                    }
                    let mut data = w.spare.pop().unwrap_or_default();
                    self.decode(Some(&mut w.dctx), frame, declared, &mut data)
                        .map_err(&bad)?;
                    if w.rbuf.len() > KEEP_BYTES {
                        w.rbuf = Vec::new();
                    }
                    // bounded: at most PACK_CACHE_BYTES of decoded packs besides this one,
                    // and two spare buffers
                    let mut held = 0;
                    for i in (0..w.packs.len()).rev() {
                        held += w.packs[i].1.len();
                        if held > PACK_CACHE_BYTES {
                            let gone: Vec<_> = w.packs.drain(..=i).collect();
                            for (_, buf) in gone {
                                if w.spare.len() < 2 && buf.capacity() <= SPARE_BYTES {
                                    w.spare.push(buf);
                                }
                            }
                            break;
                        }
                    }
                    w.packs.push((key, data));
                }
                let data = &w
                    .packs
                    .last()
                    .map(|(_, d)| d)
                    .ok_or_else(|| bad("no pack".into()))?;
                let inner = c.inner[r];
                let stop = inner.saturating_add(u);
                if stop > data.len() as u64 {
                    return Err(bad(format!(
                        "slice [{inner}, {stop}) lies outside its decoded blob of {} bytes",
                        data.len()
                    )));
                }
                let piece = &data[inner as usize..stop as usize];
                if self.check {
                    hasher.update(piece);
                }
                if self.check && hasher.finalize().as_bytes() != sum {
                    return Err(bad("BLAKE3 mismatch".into()));
                }
                out.put(piece, &mut pos, last)?;
            } else if compressed {
                if u > MAX_CHUNK_BYTES {
                    return Err(bad(format!(
                        "size {u} exceeds the {MAX_CHUNK_BYTES}-byte chunk limit"
                    )));
                }
                if u > STREAM_BYTES && matches!(self.source, Source::Local(_)) {
                    self.stream(r, &mut hasher, out, &mut pos, &bad)?;
                    if self.check && hasher.finalize().as_bytes() != sum {
                        return Err(bad("BLAKE3 mismatch".into()));
                    }
                } else {
                    let frame = self.read(&mut w.rbuf, &w.fetched, b, s).map_err(&bad)?;
                    let data = &mut w.dbuf;
                    self.decode(Some(&mut w.dctx), frame, Some(u), data)
                        .map_err(&bad)?;
                    if w.rbuf.len() > KEEP_BYTES {
                        w.rbuf = Vec::new();
                    }
                    if data.len() as u64 != u {
                        return Err(bad(format!("decoded {} bytes, index says {u}", data.len())));
                    }
                    if self.check {
                        hasher.update(data);
                    }
                    if self.check && hasher.finalize().as_bytes() != sum {
                        return Err(bad("BLAKE3 mismatch".into()));
                    }
                    out.put(data, &mut pos, last)?;
                    if data.capacity() > KEEP_BYTES {
                        *data = Vec::new();
                    }
                }
            } else {
                if s != u {
                    return Err(bad(format!("raw blob is {s} bytes, index says {u}")));
                }
                let mut at = 0u64;
                while at < s {
                    if self.stopped() {
                        return Err(Fail::Stopped);
                    }
                    let n = (s - at).min(PIECE_BYTES as u64);
                    let piece = self
                        .read(&mut w.rbuf, &w.fetched, b + at, n)
                        .map_err(&bad)?;
                    if self.check {
                        hasher.update(piece);
                    }
                    out.put(piece, &mut pos, last && at + n == s)?;
                    at += n;
                }
                if self.check && hasher.finalize().as_bytes() != sum {
                    return Err(bad("BLAKE3 mismatch".into()));
                }
            }
            total += u;
        }
        out.flush()?;
        Ok(total)
    }

    /// A big compressed chunk of a local archive decoded in pieces (memory bounded by a
    /// piece and the zstd window), its BLAKE3 checked after the last: the file is a
    /// temporary until then.
    pub(super) fn stream(
        &self,
        r: usize,
        hasher: &mut blake3::Hasher,
        out: &mut dyn Sink,
        pos: &mut u64,
        bad: &dyn Fn(String) -> Fail,
    ) -> Result<(), Fail> {
        let c = &self.cols;
        let (b, s, u) = (c.blob_offset[r], c.blob_size[r], c.size[r]);
        let Source::Local(f) = &self.source else {
            return Err(bad("not a local archive".into()));
        };
        let mut head = vec![0u8; s.min(64) as usize];
        f.read_exact_at(&mut head, b)
            .map_err(|e| bad(format!("cannot read the archive: {}", strerror(&e))))?;
        let shape = frame::parse(&head, s as usize, u);
        let start = match shape {
            Some(Shape::Zstd(pos)) => pos as u64,
            Some(Shape::Stored(pos)) => pos as u64,
            None => {
                // another shape: decoded whole by the binding (as big as the chunk)
                let frame = self.read_plain(b, s).map_err(bad)?;
                let mut data = Vec::new();
                self.decode(None, &frame, Some(u), &mut data).map_err(bad)?;
                if self.check {
                    hasher.update(&data);
                }
                out.put(&data, pos, false)?;
                return Ok(());
            }
        };
        let reader = Ranged {
            file: f,
            at: b + start,
            end: b + s,
        };
        let mut input: Box<dyn Read> = match shape {
            Some(Shape::Zstd(_)) => Box::new(
                zstd::stream::read::Decoder::new(reader)
                    .map_err(|e| bad(format!("not a valid zstd frame ({e})")))?,
            ),
            _ => Box::new(reader),
        };
        let mut buf = vec![0u8; PIECE_BYTES];
        let mut got = 0u64;
        loop {
            if self.stopped() {
                return Err(Fail::Stopped);
            }
            let mut filled = 0;
            while filled < buf.len() {
                let n = input
                    .read(&mut buf[filled..])
                    .map_err(|e| bad(format!("not a valid zstd frame ({e})")))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                break;
            }
            got += filled as u64;
            if got > u {
                return Err(bad(format!(
                    "decoded more than the {u} bytes the index says"
                )));
            }
            if self.check {
                hasher.update(&buf[..filled]);
            }
            out.put(&buf[..filled], pos, false)?;
        }
        self.bytes_read.fetch_add(s, Ordering::Relaxed);
        if got != u {
            return Err(bad(format!("decoded {got} bytes, index says {u}")));
        }
        Ok(())
    }
}

/// Many small chunks (a jar cut into its entries) are written in one `pwrite` of up to
/// this many bytes.
pub(super) const WRITE_BYTES: usize = 1 << 20;

/// A file's bytes written at their positions (runs of one file are written by several
/// workers), neighbouring small pieces gathered into one write.
pub(super) struct Out<'f> {
    pub(super) file: &'f File,
    pub(super) buf: Vec<u8>,
    pub(super) at: u64,
}

/// Where a file's decoded bytes go, in order: a file ([`Out`]) or memory (a `Vec`).
pub(super) trait Sink {
    /// `data` put at `*pos`, `*pos` moved past it; `last`: nothing follows it.
    fn put(&mut self, data: &[u8], pos: &mut u64, last: bool) -> Result<(), Fail>;
    fn flush(&mut self) -> Result<(), Fail>;
}

/// `read_many`: one worker fills a file's bytes in order (its rows were checked contiguous).
impl Sink for Vec<u8> {
    fn put(&mut self, data: &[u8], pos: &mut u64, _last: bool) -> Result<(), Fail> {
        self.extend_from_slice(data);
        *pos += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Fail> {
        Ok(())
    }
}

impl Sink for Out<'_> {
    /// `data` written at `*pos`, `*pos` moved past it; `last`: nothing follows it (written
    /// from where it lies when nothing is gathered: a one-chunk file is never copied).
    fn put(&mut self, data: &[u8], pos: &mut u64, last: bool) -> Result<(), Fail> {
        let next = self.at + self.buf.len() as u64;
        if !self.buf.is_empty() && (next != *pos || self.buf.len() + data.len() > WRITE_BYTES) {
            self.flush()?;
        }
        if data.len() >= WRITE_BYTES || (last && self.buf.is_empty()) {
            self.file.write_all_at(data, *pos).map_err(write_fail)?;
        } else {
            if self.buf.is_empty() {
                self.at = *pos;
            }
            self.buf.extend_from_slice(data);
        }
        *pos += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Fail> {
        if !self.buf.is_empty() {
            self.file
                .write_all_at(&self.buf, self.at)
                .map_err(write_fail)?;
            self.buf.clear();
        }
        Ok(())
    }
}
