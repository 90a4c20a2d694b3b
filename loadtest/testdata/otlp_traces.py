"""Writes otlp_traces.bin: an OTLP ExportTraceServiceRequest encoded by the
official protobuf definitions (PyPI's opentelemetry-proto), with 9 spans in 3
resources and 4 scopes, and every kind of field a span can carry (ids, times,
attributes, events, links, status, flags), so chatlab-load's span counter is
checked against real OTLP bytes, not only its own test encoder.

    pip install opentelemetry-proto && python3 otlp_traces.py
"""
import pathlib

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from opentelemetry.proto.common.v1.common_pb2 import KeyValue, AnyValue, InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

def kv(k, v):
    if isinstance(v, int):
        return KeyValue(key=k, value=AnyValue(int_value=v))
    return KeyValue(key=k, value=AnyValue(string_value=v))

def span(i):
    s = Span(trace_id=bytes([i+1])*16, span_id=bytes([i+1])*8, parent_span_id=bytes([9])*8,
             name=f"INSERT chat_members {i}", kind=Span.SPAN_KIND_CLIENT,
             start_time_unix_nano=1_764_547_200_000_000_000 + i, end_time_unix_nano=1_764_547_200_001_000_000 + i,
             attributes=[kv("db.system.name", "postgresql"), kv("db.response.returned_rows", 50 + i)],
             status=Status(code=Status.STATUS_CODE_OK), flags=0x301)
    s.events.add(name="exception", time_unix_nano=1_764_547_200_000_500_000)
    s.links.add(trace_id=bytes([7])*16, span_id=bytes([7])*8)
    return s

req = ExportTraceServiceRequest()
n = 0
for r, scopes in enumerate([[3, 2], [0], [4]]):
    rs = req.resource_spans.add(resource=Resource(attributes=[kv("service.name", "chatlab"), kv("service.instance.id", f"i-{r}")]), schema_url="https://opentelemetry.io/schemas/1.37.0")
    for c in scopes:
        ss = rs.scope_spans.add(scope=InstrumentationScope(name="chatlab-api", version="0.1.0"))
        for _ in range(c):
            ss.spans.append(span(n)); n += 1
assert n == 9
pathlib.Path(__file__).with_name("otlp_traces.bin").write_bytes(req.SerializeToString())
