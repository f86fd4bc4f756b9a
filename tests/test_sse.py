"""The SSE parser and the streaming loop, on scripted streams and a scripted clock."""

import json
import time

import pytest
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


payload = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=40)


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
    assert out.decode_tok_s is not None
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


@pytest.mark.process
def test_a_refused_connection_is_returned_not_raised():
    refused = stream_generate("http://127.0.0.1:9", REQ, timeout_s=2)
    assert not refused.success and refused.error


@given(st.lists(st.integers(1, 5), min_size=1, max_size=20), st.lists(st.integers(0, 5000), max_size=10))
def test_stream_split_anywhere_counts_every_token(steps, cuts):
    ids: list[int] = []
    chunks = b""
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
    calls: list[int] = []
    real = json.loads  # the json module the client reads its payloads with (perfgate.client.stream)

    def counting_loads(s, *a, **k):
        calls.append(len(s))
        return real(s, *a, **k)

    json.loads = counting_loads
    try:
        ids: list[int] = []
        chunks: list[bytes] = []
        for k in range(200):
            ids = ids + [k]
            chunks.append(_chunk(ids))
        chunks.append(b"data: [DONE]\n\n")
        t = iter(range(10_000))
        out = stream_generate("http://unused", REQ, chunks=chunks, clock=lambda: float(next(t)))
    finally:
        json.loads = real
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


# ----------------------------------------------------------------------------- the batch client's framing
#
# run_batch reads each response itself (perfgate.client.connection._Connection: status line, headers, chunked or
# Content-Length or close-delimited body) and frames SSE events in place (StreamState.feed's fast path for
# one-line `data: {...}` events). However the bytes are split, by the HTTP chunks or by the reads, the
# result must be what the plain SSE parser and the blocking client give.

import perfgate.client as client_mod  # noqa: E402
import perfgate.client.connection as client_conn  # noqa: E402

sse_line = st.sampled_from([b"data: ", b"data:", b": c", b"event: x", b"id: 1", b"data:  {}", b""])
sse_text = st.binary(max_size=12).filter(lambda b: b"\n" not in b and b"\r" not in b)
sse_sep = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def sse_streams(draw):
    """Arbitrary SSE: events of one or more lines (data, comments, other fields), any line end, garbage too."""
    out = b""
    for _ in range(draw(st.integers(0, 6))):
        sep = draw(sse_sep)
        lines = [draw(sse_line) + draw(st.sampled_from([b"{", b"", b"[DONE]"])) + draw(sse_text)
                 + draw(st.sampled_from([b"}", b""])) for _ in range(draw(st.integers(1, 3)))]
        out += sep.join(lines) + sep + sep
    return out + draw(st.binary(max_size=20))


class _Recorder(client_mod.StreamState):
    """The events StreamState's framing finds, as the data payloads SSEParser would give."""

    def __init__(self):
        super().__init__(0.0)
        self.events = []

    def _object(self, buf, p, e, now):
        self.events.append(buf[p:e].decode("utf-8", "replace"))
        return True

    def _event(self, data, now):
        self.events.append(data)
        return True


@given(sse_streams(), st.lists(st.integers(0, 400), max_size=12))
def test_in_place_framing_finds_the_events_sseparser_finds(data, cuts):
    ref = SSEParser()
    want = []
    for piece in _split(data, cuts):
        want.extend(ref.feed(piece))
    rec = _Recorder()
    for piece in _split(data, cuts):
        rec.feed(piece, 0.0)
    assert rec.events == want


class _Fut:
    def __init__(self):
        self.result = None

    def done(self):
        return self.result is not None

    def set_result(self, r):
        self.result = r


def _http_chunked(body: bytes, cuts, ext: bool) -> bytes:
    pieces = [p for p in _split(body, cuts) if p]
    out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    for p in pieces:
        out += b"%x%s\r\n%s\r\n" % (len(p), b";x=1" if ext else b"", p)
    return out + b"0\r\n\r\n"


def _read(response: bytes, reads, *, lost: bool = False):
    """Feed ``response`` to a connection in the given reads; the output its request got."""
    conn = client_conn._Connection()
    t = iter(range(1, 10_000))
    state = client_mod.StreamState(0.0)
    fut = _Fut()
    conn._expect(state, fut, 1e18, 300.0)
    clock = time.perf_counter  # the clock perfgate.client.connection reads
    time.perf_counter = lambda: float(next(t))
    try:
        for piece in _split(response, reads):
            view = conn.get_buffer(-1)
            while len(piece) > len(view):  # a read fills at most the buffer it is given
                view[:] = piece[:len(view)]
                conn.buffer_updated(len(view))
                piece = piece[len(view):]
                view = conn.get_buffer(-1)
            view[:len(piece)] = piece
            conn.buffer_updated(len(piece))
        if lost:
            conn.connection_lost(None)
    finally:
        time.perf_counter = clock
    return fut.result, conn


@given(st.lists(st.integers(1, 5), min_size=1, max_size=12), st.lists(st.integers(0, 5000), max_size=8),
       st.lists(st.integers(0, 6000), max_size=8), st.booleans())
def test_chunked_responses_split_anywhere_give_every_token(steps, chunk_cuts, reads, ext):
    ids: list[int] = []
    body = b""
    for k in steps:
        ids = ids + list(range(len(ids), len(ids) + k))
        body += _chunk(ids)
    body += b"data: [DONE]\n\n"
    out, conn = _read(_http_chunked(body, chunk_cuts, ext), reads)
    assert out is not None and out.success, out
    assert out.completion_tokens == sum(steps) and out.output_ids == tuple(range(sum(steps)))
    assert len(out.itl_s) == sum(steps) - out.first_chunk_tokens
    assert conn.reusable()  # the whole response was read: the connection takes the next request


@given(st.lists(st.integers(1, 4), min_size=1, max_size=8), st.lists(st.integers(0, 3000), max_size=6))
def test_content_length_and_close_delimited_bodies(steps, reads):
    ids: list[int] = []
    body = b""
    for k in steps:
        ids = ids + list(range(len(ids), len(ids) + k))
        body += _chunk(ids)
    body += b"data: [DONE]\n\n"
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    out, conn = _read(sized, reads)
    assert out.success and out.output_ids == tuple(range(sum(steps))) and conn.reusable()
    closed = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body
    out, conn = _read(closed, reads, lost=True)
    assert out.success and out.output_ids == tuple(range(sum(steps))) and not conn.reusable()


def test_http_errors_and_cut_streams_are_outputs():
    body = b'{"error": {"message": "boom", "code": 500}}'
    out, _ = _read(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n" % len(body) + body, [])
    assert not out.success and out.error.startswith("HTTP 500: ") and "boom" in out.error
    cut = _http_chunked(_chunk([1]) + _chunk([1, 2]), [], False)[:-5]  # no [DONE], no last chunk
    out, conn = _read(cut, [7, 90], lost=True)
    assert not out.success and "after 2 tokens" in out.error and "without [DONE]" in out.error
    out, _ = _read(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", [])
    assert not out.success and "bad chunk size" in out.error
    out, _ = _read(b"SPDY/9 200 OK\r\n\r\n", [])
    assert not out.success and "bad status line" in out.error


def test_a_sped_up_simulator_stream_adds_the_lead_its_clock_gained():
    """--sim-speedup s: the simulator says how far its clock was ahead of the wall clock when the request arrived
    (header) and at each chunk's tokens (meta_info); each arrival moves on by the lead gained since the request
    arrived, so only what the server simulated is scaled: the client's own time (here 1 s per read) counts once."""
    def body(aheads):
        return (_chunk([1], {"perfgate_sim_ahead_s": aheads[0]}) + _chunk([1, 2], {"perfgate_sim_ahead_s": aheads[1]})
                + _chunk([1, 2, 3], {"perfgate_sim_ahead_s": aheads[2]}) + b"data: [DONE]\n\n")

    def reads(resp):  # one read per event: arrivals at 1, 2, 3 and 4 s on the scripted clock
        return [resp.find(x) for x in (b"[1, 2]", b"[1, 2, 3]", b"[DONE]")]

    resp = _http_chunked(body([10.5, 12.0, 12.0]), [], False)
    plain, _ = _read(resp, reads(resp))
    assert plain.success and plain.ttft_s == 1.0 and plain.latency_s == 4.0  # a real server: no header, no lead
    for crlf in (False, True):  # SGLang's framing (read in place) and the general path (\r\n line ends)
        raw = body([10.5, 12.0, 12.0])
        resp = _http_chunked(raw.replace(b"\n", b"\r\n") if crlf else raw, [], False)
        resp = resp.replace(b"\r\n\r\n", b"\r\nX-Perfgate-Sim-Speedup: 4.0\r\nX-Perfgate-Sim-Ahead: 10.0\r\n\r\n", 1)
        fast, _ = _read(resp, reads(resp))
        assert fast.success, fast.error
        assert fast.ttft_s == pytest.approx(1.5)  # 1 s of wall time + 0.5 s the simulated clock gained
        assert fast.itl_s == pytest.approx((2.5, 1.0))  # gains 1.5 s, then none
        assert fast.last_token_s == pytest.approx(5.0) and fast.latency_s == pytest.approx(6.0)
        assert fast.decode_tok_s == pytest.approx(2 / 3.5)
    # a chunk without the key keeps the lead gained so far; a lead that is not a number is no lead
    resp = _http_chunked(_chunk([1], {"perfgate_sim_ahead_s": 10.5}) + _chunk([1, 2]) + b"data: [DONE]\n\n", [], False)
    resp = resp.replace(b"\r\n\r\n", b"\r\nX-Perfgate-Sim-Ahead: 10.0\r\n\r\n", 1)
    out, _ = _read(resp, [resp.find(b"[1, 2]"), resp.find(b"[DONE]")])
    assert out.ttft_s == pytest.approx(1.5) and out.itl_s == pytest.approx((1.0,))
    resp = resp.replace(b"X-Perfgate-Sim-Ahead: 10.0", b"X-Perfgate-Sim-Ahead: soon")
    out, _ = _read(resp, [resp.find(b"[1, 2]"), resp.find(b"[DONE]")])
    assert out.ttft_s == 1.0 and out.itl_s == (1.0,)
