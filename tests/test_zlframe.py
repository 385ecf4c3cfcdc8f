"""The GIL-free OpenZL frame path (znippy_sql.format.zlframe) against the OpenZL binding itself:
the frames it writes are the binding's bytes, the frames it reads are decoded as the binding
decodes them, and anything else is left to the binding."""

from __future__ import annotations

import random

import openzl.ext as zl
import pytest
from conftest import random_bytes, text_bytes

from znippy_sql import CodecError
from znippy_sql.format import codec, zlframe


def _inputs(seed: int) -> list[bytes]:
    """Text, noise, text with noise sprinkled in (zstd output near the input size), and the
    sizes around the frame's varint and window boundaries."""
    rng = random.Random(seed)
    text = text_bytes(3 << 20, seed)
    noise = random_bytes(1 << 20, seed + 1)
    out = [b"", b"a", text[:50], noise[:127]]
    for n in (127, 128, 129, 255, 256, 16383, 16384, 65535, 65536, 65537, 131072, 1 << 20,
              (1 << 20) + 3, 3 << 20):
        out.append(text[:n])
    for _ in range(80):
        n = rng.choice([rng.randint(1, 400), rng.randint(1, 70_000), rng.randint(1, 300_000)])
        start = rng.randrange(0, len(text) - n)
        chunk = bytearray(text[start : start + n])
        for _ in range(int(n * rng.random() * 0.9)):  # 0-90 % of the bytes made random
            chunk[rng.randrange(n)] = rng.randrange(256)
        out.append(bytes(chunk))
    out.append(noise)
    return out


@pytest.mark.parametrize("level", [1, 3, 5, -1])
def test_fast_frames_are_the_bindings_frames(level: int) -> None:
    enc = codec.Encoder(level)
    assert enc._fast is not None  # the self-check passed on this openzl
    fast = zlframe.FastEncoder(level)
    inputs = _inputs(level + 10)
    batch = fast.frames_if_smaller(inputs)
    for data, parts in zip(inputs, batch):
        binding = enc.encode(data)
        mine = fast.frame_if_smaller(data)
        if len(binding) < len(data):  # the writer keeps the frame: ours is the same bytes
            assert mine == binding
        else:  # the writer stores the chunk raw: so does the fast path
            assert mine is None
        assert (None if parts is None else b"".join(parts)) == mine


def test_decoder_reads_both_shapes_and_leaves_other_frames_to_the_binding() -> None:
    data = text_bytes(200_000, 3)
    dec = codec.Decoder()
    # the binding's stored shape (tiny input) and zstd shape, read without the binding
    for chunk in (b"tiny", data):
        frame = codec.Encoder(3).encode(chunk)
        assert zlframe.parse(frame, len(chunk)) is not None
        assert zlframe.FastDecoder().decode(frame, len(chunk)) == chunk
        assert dec.decode(frame, len(chunk)) == chunk
    # a frame with OpenZL checksums is another shape: the binding decodes it
    cctx = zl.CCtx()
    compressor = zl.Compressor()
    compressor.select_starting_graph(zl.graphs.Zstd()(compressor))
    cctx.ref_compressor(compressor)
    cctx.set_parameter(zl.CParam.FormatVersion, 8)
    cctx.set_parameter(zl.CParam.ContentChecksum, 1)
    import numpy as np

    checked = cctx.compress([zl.Input(zl.Type.Serial, np.frombuffer(data, dtype=np.uint8))])
    assert zlframe.parse(checked, len(data)) is None
    assert dec.decode(checked, len(data)) == data
    assert bytes(dec.decode_view(checked, len(data))) == data


def test_damaged_frames_get_the_bindings_verdict() -> None:
    data = text_bytes(100_000, 4)
    frame = codec.Encoder(3).encode(data)
    dec = codec.Decoder()
    damaged = [
        frame[:-1],  # truncated zstd frame
        frame + b"\x00",  # trailing byte
        frame[:20] + bytes([frame[20] ^ 0xFF]) + frame[21:],  # zstd header damaged
        frame[:-40] + bytes(b ^ 0x5A for b in frame[-40:]),  # zstd blocks damaged
        b"\xc8\xa5\xb1\xd7" + b"\xff" * 20,  # magic, then garbage
    ]
    for bad in damaged:
        with pytest.raises(CodecError):
            dec.decode(bad, len(data))
    # the declared size must be the expected one (checked before anything is decoded)
    with pytest.raises(CodecError, match="index says"):
        dec.decode(frame, len(data) + 1)
    assert zlframe.parse(frame, len(data) + 1) is None


def test_a_binding_that_lays_frames_out_differently_turns_the_fast_path_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zlframe, "_CHECKED", {})
    assert not zlframe.fast_path_ok(3, lambda chunk: b"some other layout")
    monkeypatch.setattr(zlframe, "_CHECKED", {})
    assert zlframe.fast_path_ok(3, codec.Encoder(3).encode)
    monkeypatch.setattr(zlframe, "_CHECKED", {3: False})
    enc = codec.Encoder(3)
    assert enc._fast is None
    data = text_bytes(50_000, 5)
    assert enc.frame_if_smaller(data) == enc.encode(data)  # the binding writes them
    assert b"".join(enc.frames_if_smaller([data])[0]) == enc.encode(data)  # type: ignore


def test_frames_in_any_buffer_are_recognised() -> None:
    """The reader hands over pyarrow Buffers of the memory map (signed-byte views)."""
    import pyarrow as pa

    data = text_bytes(20_000, 6)
    frame = codec.Encoder(3).encode(data)
    for buf in (frame, memoryview(frame), pa.py_buffer(frame), memoryview(pa.py_buffer(frame))):
        assert zlframe.parse(buf, len(data)) is not None
        assert zlframe.FastDecoder().decode(buf, len(data)) == data


def test_batch_decode_reports_the_one_bad_frame_and_keeps_the_rest(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One damaged frame among a unit's small files: the GIL-free batch call fails as a whole,
    each frame is retried alone, and only the damaged file is reported (and not created)."""
    import znippy_sql.read.extract as ex
    from znippy_sql import Entry, open_archive, write_archive

    files = {f"d/{i:02d}.txt": text_bytes(3000 + 100 * i, i) for i in range(40)}
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry(p, data=d) for p, d in files.items()], workers=1, fsync=False,
                  pack=False)  # one frame a file: one of them damaged
    with open_archive(out) as a:
        row = next(r for r in a.lookup.to_pylist() if r["relative_path"] == "d/07.txt")
    assert row["compressed"]
    data = bytearray(out.read_bytes())
    data[row["blob_offset"] + row["blob_size"] - 30] ^= 0x40  # inside the zstd blocks
    out.write_bytes(bytes(data))
    monkeypatch.setattr(ex, "THREAD_BYTES", 0)
    with open_archive(out) as a:
        views = a.one_chunk_views([(p, a.find(p).lookup_row) for p in sorted(files)])  # type: ignore
        bad = [i for i, v in enumerate(views) if v is None]  # left to chunk_view, which raises
        assert bad == [7]
        assert [bytes(v) for i, v in enumerate(views) if i != 7] == [
            files[p] for p in sorted(files) if p != "d/07.txt"]
        report = a.extract(tmp_path / "x", workers=2)
    assert list(report.failed) == ["d/07.txt"]
    assert not (tmp_path / "x" / "d" / "07.txt").exists()
    assert report.files == 39


def test_the_fast_reader_accepts_nothing_the_binding_refuses() -> None:
    """Random byte flips, truncations and extensions of valid frames: whenever our decoder
    returns bytes, the OpenZL binding decodes the same frame to the same bytes."""
    rng = random.Random(7)
    dec = codec.Decoder()
    frames = []
    for n in (0, 5, 300, 20_000):
        data = text_bytes(n, n + 1)
        frames.append((codec.Encoder(3).encode(data), n))
    for _ in range(2500):
        frame, n = frames[rng.randrange(len(frames))]
        bad = bytearray(frame)
        what = rng.random()
        if what < 0.6 and bad:
            bad[rng.randrange(min(len(bad), 40) if rng.random() < 0.7 else len(bad))] ^= (
                1 << rng.randrange(8))
        elif what < 0.8:
            del bad[rng.randrange(len(bad) + 1):]
        else:
            bad += bytes([rng.randrange(256)])
        try:
            mine = dec.decode(bytes(bad), n)
        except CodecError:
            continue
        try:
            theirs = dec._output(bytes(bad), n, "").as_bytes()
        except CodecError:
            raise AssertionError(f"accepted a frame the binding refuses: {bytes(bad).hex()}")
        assert mine == theirs


def test_one_chunk_views_touch_each_blob_once(tmp_path) -> None:
    """The batch path reads each compressed blob once (the bytes-read counter that proves
    pruning elsewhere must not count it twice)."""
    from znippy_sql import Entry, open_archive, write_archive

    files = {f"f{i}.txt": text_bytes(4000 + i, i) for i in range(10)}
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry(p, data=d) for p, d in files.items()], workers=1, fsync=False)
    with open_archive(out) as a:
        infos = [a.find(p) for p in sorted(files)]
        before = a.source.bytes_read
        views = a.one_chunk_views([(i.relative_path, i.lookup_row) for i in infos])  # type: ignore
        assert [bytes(v) for v in views] == [files[p] for p in sorted(files)]  # type: ignore
        assert a.source.bytes_read - before == sum(i.stored_size for i in infos)  # type: ignore
