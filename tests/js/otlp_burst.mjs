// A burst through the official OpenTelemetry JavaScript OTLP/HTTP exporter (tests/test_server_burst.py).
// usage: node otlp_burst.mjs URL TRACES SPANS_PER_TRACE CLIENTS BATCH
// Prints {"spans": n, "delivered": n, "failed": n}: spans, judged by each export's own result.
import { context, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";

const [url, traces, spansPerTrace, clients, batch] = [process.argv[2], ...process.argv.slice(3).map(Number)];
const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
const tracer = provider.getTracer("js-burst");
for (let t = 0; t < traces; t++) {
  const root = tracer.startSpan(`invoke_agent js-${t}`,
    { attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "js-agent" } });
  const parent = trace.setSpan(context.active(), root);
  for (let s = 1; s < spansPerTrace; s++) {
    tracer.startSpan("chat m", { attributes: { "gen_ai.operation.name": "chat" } }, parent).end();
  }
  root.end();
}
const spans = memory.getFinishedSpans();
const batches = [];
for (let i = 0; i < spans.length; i += batch) batches.push(spans.slice(i, i + batch));
let delivered = 0, failed = 0;
async function client(n) {
  const exporter = new OTLPTraceExporter({ url, timeoutMillis: 60000 });
  for (let i = n; i < batches.length; i += clients) {
    const result = await new Promise((resolve) => exporter.export(batches[i], resolve));
    if (result.code === 0) delivered += batches[i].length;
    else { failed += batches[i].length; console.error(String(result.error)); }
  }
  await exporter.shutdown();
}
await Promise.all(Array.from({ length: clients }, (_, n) => client(n)));
console.log(JSON.stringify({ spans: spans.length, delivered, failed }));
