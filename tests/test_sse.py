"""The SSE parser and the streaming loop, on scripted streams and a scripted clock."""

import json

from hypothesis import given
from hypothesis import strategies as st

from perfgate.client import GenRequest, SSEParser, stream_generate


def _events(payloads, sep=b"\n\n"):
    return b"".join(b"data: " + p.encode() + sep for p in payloads)


def _split(data: bytes, cuts):
    pts = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for c in pts:
        out.append(data[prev:c])
        prev = c
    out.append(data[prev:])
    return out


payload = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=40)


@given(st.lists(payload, min_size=1, max_size=8), st.lists(st.integers(0, 10_000), max_size=20),
       st.sampled_from([b"\n\n", b"\r\n\r\n"]))
def test_chunks_split_anywhere_give_the_same_events(payloads, cuts, sep):
    data = _events(payloads, sep)
    p = SSEParser()
    got = []
    for piece in _split(data, cuts):
        got.extend(p.feed(piece))
    got.extend(p.flush())
    assert got == payloads


@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=10))
def test_parser_never_raises_on_garbage(data, cuts):
    p = SSEParser()
    for piece in _split(data, cuts):
        p.feed(piece)
    p.flush()


def test_non_data_lines_and_multiline_data():
    p = SSEParser()
    assert p.feed(b": comment\n\nevent: x\ndata: a\ndata: b\n\n") == ["a\nb"]


class Clock:
    """A scripted clock: each call returns the next value."""

    def __init__(self, times):
        self.times = list(times)

    def __call__(self):
        return self.times.pop(0)


def _chunk(ids, extra=None):
    meta = {"completion_tokens": len(ids), "prompt_tokens": 4}
    meta.update(extra or {})
    return b"data: " + json.dumps({"output_ids": ids, "meta_info": meta}).encode() + b"\n\n"


REQ = GenRequest(input_ids=(1, 2, 3, 4), max_new_tokens=4)


def test_timing_invariants_cumulative_chunks():
    # start 0; chunks at 0.1 (1 token), 0.2, 0.3, 0.5 (cumulative); [DONE] at 0.6; end 0.7
    chunks = [_chunk([5]), _chunk([5, 6]), _chunk([5, 6, 7]), _chunk([5, 6, 7, 8]), b"data: [DONE]\n\n"]
    clock = Clock([0.0, 0.1, 0.2, 0.3, 0.5, 0.6, 0.7])
    out = stream_generate("http://unused", REQ, chunks=chunks, clock=clock)
    assert out.success, out.error
    assert out.ttft_s == 0.1
    assert out.completion_tokens == 4 and out.output_ids == (5, 6, 7, 8)
    assert len(out.itl_s) == 3
    # the decode window is first to last token-bearing chunk: [DONE] and the close are not decode time
    assert abs((0.5 - 0.1) - sum(out.itl_s)) < 1e-12
    assert out.last_token_s == 0.5 and out.latency_s == 0.7
    assert abs(out.decode_tok_s - 3 / (0.5 - 0.1)) < 1e-9


def test_speculative_chunks_carry_several_tokens_counted_from_completion_tokens():
    chunks = [_chunk([1]), _chunk([1, 2, 3]), _chunk([1, 2, 3, 4, 5, 6], {"spec_verify_ct": 3}), b"data: [DONE]\n\n"]
    clock = Clock([0.0, 0.1, 0.2, 0.4, 0.5, 0.5])
    out = stream_generate("http://unused", REQ, chunks=chunks, clock=clock)
    assert out.success
    assert out.completion_tokens == 6 and out.first_chunk_tokens == 1
    assert len(out.itl_s) == 5  # one per token after the first, not one per chunk
    assert out.accept_len == 2.0
    assert abs(sum(out.itl_s) - 0.3) < 1e-12


def test_failures_are_returned_not_raised():
    bad = stream_generate("http://unused", REQ, chunks=[b"data: {not json\n\n"], clock=Clock([0, 1, 2]))
    assert not bad.success and "malformed" in bad.error
    err = stream_generate("http://unused", REQ, chunks=[b'data: {"error": {"message": "boom"}}\n\n'],
                          clock=Clock([0, 1, 2]))
    assert not err.success and "boom" in err.error
    cut = stream_generate("http://unused", REQ, chunks=[_chunk([1])], clock=Clock([0, 1, 2]))
    assert not cut.success and "without [DONE]" in cut.error
    refused = stream_generate("http://127.0.0.1:9", REQ, timeout_s=2)
    assert not refused.success and refused.error


@given(st.lists(st.integers(1, 5), min_size=1, max_size=20), st.lists(st.integers(0, 5000), max_size=10))
def test_stream_split_anywhere_counts_every_token(steps, cuts):
    ids, chunks = [], b""
    for k in steps:
        ids = ids + list(range(len(ids), len(ids) + k))
        chunks += _chunk(ids)
    chunks += b"data: [DONE]\n\n"
    pieces = _split(chunks, cuts)
    t = iter(range(10_000))
    out = stream_generate("http://unused", REQ, chunks=pieces, clock=lambda: float(next(t)))
    assert out.success
    assert out.completion_tokens == sum(steps)
    assert out.output_ids == tuple(range(sum(steps)))
    assert len(out.itl_s) == sum(steps) - out.first_chunk_tokens


def test_only_the_last_payload_is_parsed_whole():
    """Cumulative chunks grow with the tokens so far; the client reads completion_tokens from the end of each
    and parses just the last one (output ids, acceptance): the counts and ids come out the same."""
    import perfgate.client as client

    calls = []
    real = client.json.loads
    client.json.loads = lambda text, *a, **k: calls.append(len(text)) or real(text, *a, **k)
    try:
        ids, chunks = [], []
        for k in range(200):
            ids = ids + [k]
            chunks.append(_chunk(ids))
        chunks.append(b"data: [DONE]\n\n")
        t = iter(range(10_000))
        out = stream_generate("http://unused", REQ, chunks=chunks, clock=lambda: float(next(t)))
    finally:
        client.json.loads = real
    assert out.success and out.completion_tokens == 200 and out.output_ids == tuple(range(200))
    assert len(calls) == 2  # the second chunk (cumulative or incremental?) and the final payload, of 200


def test_a_truncated_payload_is_malformed_even_mid_stream():
    chunks = [_chunk([1]), b'data: {"output_ids": [1, 2, <truncated\n\n', _chunk([1, 2]), b"data: [DONE]\n\n"]
    out = stream_generate("http://unused", REQ, chunks=chunks, clock=Clock([0, 1, 2, 3, 4, 5]))
    assert not out.success and "malformed SSE data" in out.error


def _inc_chunk(new_ids, total):
    return b"data: " + json.dumps({"output_ids": new_ids, "meta_info": {"completion_tokens": total}}).encode() + b"\n\n"


@given(st.lists(st.integers(1, 5), min_size=1, max_size=20), st.lists(st.integers(0, 5000), max_size=10))
def test_incremental_streams_give_the_same_tokens_and_ids(steps, cuts):
    """--incremental-streaming-output: each chunk carries its new ids only; completion_tokens stays cumulative."""
    chunks, total = b"", 0
    for k in steps:
        chunks += _inc_chunk(list(range(total, total + k)), total + k)
        total += k
    chunks += b"data: [DONE]\n\n"
    t = iter(range(10_000))
    out = stream_generate("http://unused", REQ, chunks=_split(chunks, cuts), clock=lambda: float(next(t)))
    assert out.success, out.error
    assert out.completion_tokens == total and out.output_ids == tuple(range(total))
