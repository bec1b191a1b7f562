// Spans of every attribute type, encoded as the official OpenTelemetry JavaScript OTLP exporter
// sends them (its protobuf serializer), for tests/formats/test_otlp_native.py.
// usage: node encode_spans.mjs   Prints the ExportTraceServiceRequest, base64.
import { context, trace, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";

const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "js-agent", "deployment.environment.name": "test", "k8s.pod.uid": 7 }),
  spanProcessors: [new SimpleSpanProcessor(memory)],
});
const tracer = provider.getTracer("js-encode", "1.2.3");
const root = tracer.startSpan("invoke_agent planner", {
  kind: SpanKind.SERVER,
  attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "héllo.wörld": "ünïcode ✓ 🚀" },
});
const parent = trace.setSpan(context.active(), root);
const chat = tracer.startSpan("chat gpt", {
  kind: SpanKind.CLIENT,
  attributes: {
    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt", "gen_ai.usage.input_tokens": 12,
    "gen_ai.usage.output_tokens": -3, "gen_ai.request.temperature": 0.25, "stream": false,
    "gen_ai.response.finish_reasons": ["tool_calls", "stop"], "ints": [1, 2, 3], "empty": "",
    "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [{ type: "tool_call", id: "c1", name: "search", arguments: { q: "x" } }] }]),
  },
}, parent);
chat.addEvent("gen_ai.client.inference.operation.details", { "gen_ai.input.messages": "[]", n: 2 });
chat.end();
const tool = tracer.startSpan("execute_tool search", {
  attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.id": "c1" },
  links: [{ context: chat.spanContext(), attributes: { "link.kind": "caused-by" } }],
}, parent);
tool.recordException(new Error("timeout after 3 s"));
tool.setStatus({ code: SpanStatusCode.ERROR, message: "timeout" });
tool.end();
root.setStatus({ code: SpanStatusCode.OK });
root.end();
process.stdout.write(Buffer.from(ProtobufTraceSerializer.serializeRequest(memory.getFinishedSpans())).toString("base64"));
