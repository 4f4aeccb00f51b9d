// The official AG-UI client (@ag-ui/client's HttpAgent) against a Soulacy server, for the tests
// of tests/plugins/agui (agui_support.py starts it). One JSON argument:
//   {clientDir, url, eventsUrl, key, threadId, mode: "run" | "connect" | "abort" | "approve",
//    runs: [{runId, text}]}
// "run": each run is one `runAgent` of the same agent, so that the thread's messages carry
// over as an AG-UI application's do. "connect": `connectAgent` attaches to each existing run.
// "abort": `runAgent`, then `abortRun()` once the run's first two events have arrived.
// "approve": like "run", but a run that follows an interrupted one answers its interrupts
// (approved when its text is "approve", refused otherwise) instead of sending a message.
// Prints one JSON line per thing the client reports (its state after each change too); the
// client checks the events itself (its verifyEvents) and reports a stream it rejects as a
// failed run.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const entry = join(config.clientDir, "node_modules", "@ag-ui", "client", "dist", "index.mjs");
const { HttpAgent, runHttpRequest, transformHttpEventStream } = await import(
  pathToFileURL(entry).href
);
const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");

class ReconnectingAgent extends HttpAgent {
  // The client's extension point for attaching to a run that is under way or over
  // (`connectAgent`), which HttpAgent leaves out (the SSE binding has no resumption): here
  // Soulacy's events route, read with the client's own HTTP and SSE code.
  connect(input) {
    const url = `${config.eventsUrl}/${encodeURIComponent(input.runId)}/events`;
    const init = { headers: this.headers, signal: this.abortController.signal };
    return transformHttpEventStream(runHttpRequest(() => fetch(url, init)));
  }
}

const agent = new ReconnectingAgent({
  url: config.url,
  threadId: config.threadId,
  headers: config.key ? { Authorization: `Bearer ${config.key}` } : {},
});
for (const run of config.runs) {
  const subscriber = {
    onEvent: ({ event }) => {
      say({ run: run.runId, kind: "event", event });
      if (config.mode === "abort" && event.type === "STATE_SNAPSHOT") agent.abortRun();
    },
    onRunFinishedEvent: ({ outcome }) => say({ run: run.runId, kind: "finished", outcome }),
    onRunErrorEvent: ({ event }) => say({ run: run.runId, kind: "run_error", event }),
    onRunFailed: ({ error }) => say({ run: run.runId, kind: "failed", error: String(error) }),
    // The state as the client holds it after each change (a STATE_DELTA applied by its own
    // JSON Patch code, which warns on stderr when a patch does not apply).
    onStateChanged: ({ state }) => say({ run: run.runId, kind: "state", state }),
  };
  try {
    let result;
    if (config.mode === "connect") {
      result = await agent.connectAgent({ runId: run.runId }, subscriber);
    } else if (config.mode === "approve") {
      // Each run after the first answers the interrupts the run before it ended with.
      if (agent.pendingInterrupts.length === 0) {
        agent.addMessage({ id: `${run.runId}-user`, role: "user", content: run.text });
        result = await agent.runAgent({ runId: run.runId }, subscriber);
      } else {
        const resume = agent.pendingInterrupts.map((interrupt) => ({
          interruptId: interrupt.id,
          status: "resolved",
          payload: { approved: run.text === "approve", note: "from the official client" },
        }));
        result = await agent.runAgent({ runId: run.runId, resume }, subscriber);
      }
    } else {
      agent.addMessage({ id: `${run.runId}-user`, role: "user", content: run.text });
      result = await agent.runAgent({ runId: run.runId }, subscriber);
    }
    say({ run: run.runId, kind: "result", result: result.result });
  } catch (error) {
    say({ run: run.runId, kind: "rejected", error: String(error), status: error.status });
  }
}
say({ kind: "messages", messages: agent.messages });
