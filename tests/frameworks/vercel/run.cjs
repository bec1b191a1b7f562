// Runs the Vercel AI SDK scenarios of tests/test_frameworks_vercel.py, exporting their spans over OTLP.
//
//   node run.cjs '{"project": ".../ai5", "otlp": "http://127.0.0.1:PORT", "protocol": "http/protobuf" | "http/json",
//                  "api": "chat" | "responses", "baseURL": "http://127.0.0.1:PORT/v1", "spans": "spans.jsonl",
//                  "runs": [{"name": "single-generateText", "function": "generateText", "prompt": "..."}, ...]}'
//
// `project` is the node project (ai5/ or ai6/) whose node_modules hold the pinned packages: one
// script for both majors. Each run is one agent trace: functionId "concierge", the model and
// metadata.sessionId named after the run (how the scripted server and the test tell runs apart);
// its ask_expert tool runs a sub-agent, functionId "weather-expert", model "<run>-expert".
// `spans`: every span is also written there as a JSON line (ids, times, attributes, resource), so the test
// builds the expected AgentTraces from what the SDK recorded, not from what serve assembled.
// Prints one JSON line per run: {"name", "text", "steps"} or {"name", "error"}.
"use strict";

const fs = require("node:fs");
const { createRequire } = require("node:module");
const path = require("node:path");

const options = JSON.parse(process.argv[2]);
const load = createRequire(path.join(options.project, "package.json"));

const { NodeTracerProvider } = load("@opentelemetry/sdk-trace-node");
const { BatchSpanProcessor, SimpleSpanProcessor } = load("@opentelemetry/sdk-trace-base");
const { resourceFromAttributes } = load("@opentelemetry/resources");
const { OTLPTraceExporter } = load(
  options.protocol === "http/json" ? "@opentelemetry/exporter-trace-otlp-http" : "@opentelemetry/exporter-trace-otlp-proto",
);
const { generateText, streamText, stepCountIs, tool, ToolLoopAgent, Experimental_Agent } = load("ai");
const { createOpenAI } = load("@ai-sdk/openai");
const { z } = load("zod");

const nanos = ([seconds, nanoseconds]) => (BigInt(seconds) * 1000000000n + BigInt(nanoseconds)).toString();

/** Writes each span as a JSON line to `options.spans` (the test's record of what the SDK emitted). */
const fileExporter = {
  export(spans, done) {
    const lines = spans.map((span) => JSON.stringify({
      traceId: span.spanContext().traceId,
      spanId: span.spanContext().spanId,
      parentSpanId: span.parentSpanContext ? span.parentSpanContext.spanId : null,
      name: span.name,
      start: nanos(span.startTime),
      end: nanos(span.endTime),
      attributes: span.attributes,
      resource: span.resource.attributes,
    }) + "\n");
    fs.appendFileSync(options.spans, lines.join(""));
    done({ code: 0 });
  },
  shutdown: async () => {},
};

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "vercel-agent" }),
  spanProcessors: [
    new BatchSpanProcessor(new OTLPTraceExporter({ url: `${options.otlp}/v1/traces` })),
    new SimpleSpanProcessor(fileExporter),
  ],
});
provider.register();

const openai = createOpenAI({ baseURL: options.baseURL, apiKey: "test" });

const telemetry = (functionId, name, content = true) => ({
  isEnabled: true,
  recordInputs: content,
  recordOutputs: content,
  functionId,
  metadata: { sessionId: name },
});
const model = (name) => (options.api === "responses" ? openai.responses(name) : openai.chat(name));

const getWeather = tool({
  description: "The weather in a city.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, forecast: "sunny", temperature_c: 21 }),
});

/** The concierge's tools in run `name`; ask_expert runs a sub-agent (its own generateText, model "<name>-expert"). */
const toolsOf = (name, content) => ({
  get_weather: getWeather,
  local_time: tool({
    description: "The local time in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => `10:30 in ${city}`,
  }),
  book_table: tool({
    description: "Book a restaurant table.",
    inputSchema: z.object({ restaurant: z.string(), people: z.number() }),
    execute: async ({ restaurant }) => {
      if (restaurant === "Chez Nobody") throw new Error(`no tables left at ${restaurant}`);
      return `booked ${restaurant}`;
    },
  }),
  ask_expert: tool({
    description: "Ask the weather expert.",
    inputSchema: z.object({ question: z.string() }),
    execute: async ({ question }) => {
      const result = await generateText({
        model: model(`${name}-expert`),
        prompt: question,
        tools: { get_weather: getWeather },
        stopWhen: stepCountIs(5),
        experimental_telemetry: telemetry("weather-expert", name, content),
      });
      return result.text;
    },
  }),
});

async function run({ name, function: fn, prompt, content = true }) {
  const settings = {
    model: model(name),
    system: "You are a concierge.",
    prompt,
    tools: toolsOf(name, content),
    stopWhen: stepCountIs(5),
    experimental_telemetry: telemetry("concierge", name, content),
  };
  if (fn === "generateText") {
    const result = await generateText(settings);
    return { text: result.text, steps: result.steps.length };
  }
  if (fn === "agent") {  // the agent class: ToolLoopAgent (ai 6, `instructions`), Experimental_Agent (ai 5, `system`)
    const { system, prompt: _, ...rest } = settings;
    const agent = ToolLoopAgent ? new ToolLoopAgent({ ...rest, instructions: system }) : new Experimental_Agent({ ...rest, system });
    const result = await agent.generate({ prompt });
    return { text: result.text, steps: result.steps.length };
  }
  let streamError;
  const result = streamText({ ...settings, onError: ({ error }) => { streamError = error; } });
  await result.consumeStream();
  if (streamError) throw streamError;
  return { text: await result.text, steps: (await result.steps).length };
}

(async () => {
  for (const spec of options.runs) {
    try {
      console.log(JSON.stringify({ name: spec.name, ...(await run(spec)) }));
    } catch (error) {
      console.log(JSON.stringify({ name: spec.name, error: String((error && error.stack) || error) }));
    }
  }
  await provider.shutdown();
})();
