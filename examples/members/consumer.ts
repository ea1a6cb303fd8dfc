// A member of a DeltaBus consumer group, in TypeScript on Node 18+ (the
// built-in fetch; no dependencies).
//
// Members of one group share its events: each event goes to one member at
// a time, and the events of one key come one after the other, in commit
// order. Start as many members as the handler needs; stop or kill them at
// any time: what a member did not acknowledge is handed to another once
// its lease ends.
//
//   tsc consumer.ts && node consumer.js --url http://127.0.0.1:8089 \
//       --group billing --topic orders --member "$(hostname)-1" [--token-file F]
//
// Each handled event is printed as one JSON line. Replace handle() with
// your own work; a thrown error gives the event back to be handed out again.

import { readFileSync } from "node:fs";

interface DeltaBusEvent {
  event_id: string;
  topic: string;
  key: string;
  type: string;
  schema_version: number;
  payload: unknown;
  headers: unknown;
  occurred_at: string;
  commit_lsn: number;
  seq: number;
  source?: string;
  version: number;
  offset: number;
}

interface Message {
  ack_id: string;
  delivery: number;
  event: DeltaBusEvent;
}

class HTTPError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

// Group is the HTTP API of `relay serve` for one group of one topic.
class Group {
  private readonly base: string;
  constructor(url: string, group: string, topic: string, private readonly token?: string) {
    this.base = `${url.replace(/\/+$/, "")}/v1/groups/${encodeURIComponent(group)}/topics/${encodeURIComponent(topic)}`;
  }

  private async post(op: string, body: unknown): Promise<any> {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (this.token) headers["Authorization"] = `Bearer ${this.token}`;
    const resp = await fetch(`${this.base}/${op}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(90_000),
    });
    const answer = await resp.json();
    if (!resp.ok) throw new HTTPError(resp.status, answer.error ?? resp.statusText);
    return answer;
  }

  async receive(member: string, max = 10, waitMs = 5000, visibilityMs = 30000): Promise<Message[]> {
    const answer = await this.post("receive", { member, max, wait_ms: waitMs, visibility_ms: visibilityMs });
    return answer.messages;
  }

  ack(ackIds: string[]): Promise<AckAnswer> {
    return this.post("ack", { ack_ids: ackIds });
  }

  nack(ackIds: string[], retryAfterMs = 1000): Promise<unknown> {
    return this.post("nack", { ack_ids: ackIds, retry_after_ms: retryAfterMs });
  }
}

function flag(name: string, def?: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type AckAnswer = { acked: number; failed: { ack_id: string; reason: string }[] };

// ackWithinLease acknowledges, retrying while the server cannot be reached
// and the leases hold: an acknowledgement repeated after one that landed
// succeeds again, so a retry after a server restart loses nothing. It
// returns undefined when the leases ended first; the events are then
// handed out again. A 4xx answer is thrown: retrying cannot help.
async function ackWithinLease(group: Group, ackIds: string[], leaseEnd: number): Promise<AckAnswer | undefined> {
  let backoff = 100;
  for (;;) {
    try {
      return await group.ack(ackIds);
    } catch (e) {
      if (e instanceof HTTPError && e.status < 500) throw e;
    }
    if (performance.now() + backoff > leaseEnd) return undefined;
    await sleep(backoff);
    backoff = Math.min(backoff * 2, 1000);
  }
}
// Wall-clock nanoseconds, finer than Date.now() (tests compare them with
// other processes' clocks on the same machine).
const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));

async function main(): Promise<number> {
  const url = flag("url", process.env.DELTABUS_SERVE_URL ?? "http://127.0.0.1:8089")!;
  const [groupName, topic, member] = [flag("group"), flag("topic"), flag("member")];
  if (!groupName || !topic || !member) {
    console.error("usage: node consumer.js --group G --topic T --member M [--url U] [--token-file F]");
    return 2;
  }
  const tokenFile = flag("token-file");
  const token = tokenFile ? readFileSync(tokenFile, "utf8").trim().split(/\s+/)[0] : undefined;
  const max = Number(flag("max", "10"));
  const handleMs = Number(flag("handle-ms", "0"));
  const visibilityMs = Number(flag("visibility-ms", "30000"));
  const trace = process.argv.includes("--trace");
  const group = new Group(url, groupName, topic, token);

  let stopping = false;
  process.on("SIGTERM", () => (stopping = true));
  process.on("SIGINT", () => (stopping = true));

  let backoff = 100;
  while (!stopping) {
    let msgs: Message[];
    const asked = performance.now();
    try {
      msgs = await group.receive(member, max, 2000, visibilityMs);
    } catch (e) {
      if (e instanceof HTTPError && e.status < 500) {
        console.error(`consumer.ts: ${e.status}: ${e.message}`); // our request is wrong: retrying cannot help
        return 1;
      }
      await sleep(backoff); // the server restarts
      backoff = Math.min(backoff * 2, 5000);
      continue;
    }
    const received = nowNs();
    backoff = 100;
    const done: string[] = [];
    const lines: Record<string, unknown>[] = [];
    for (const m of msgs) {
      if (handleMs) await sleep(handleMs);
      const ev = m.event;
      const line: Record<string, unknown> = {
        member, delivery: m.delivery, event_id: ev.event_id, key: ev.key, version: ev.version, offset: ev.offset, payload: ev.payload,
      };
      if (trace) line.received_ns = received.toString();
      lines.push(line);
      done.push(m.ack_id);
    }
    if (done.length === 0) continue;
    const sent = nowNs();
    if (trace) {
      // The acknowledgement may land and this member die before it hears so.
      for (const l of lines) {
        const acking = { member, event_id: l.event_id, delivery: l.delivery, acking: true, ack_sent_ns: sent.toString() };
        process.stdout.write(JSON.stringify(acking) + "\n");
      }
    }
    let res: AckAnswer | undefined;
    try {
      // The leases were granted after the request was sent: they end no
      // earlier than its sending plus the visibility.
      res = await ackWithinLease(group, done, asked + visibilityMs);
    } catch (e) {
      console.error(`consumer.ts: ${e instanceof HTTPError ? e.status : "ack"}: ${(e as Error).message}`);
      return 1;
    }
    if (!res) continue; // not acknowledged: handed out again now that the leases ended
    const failed = new Set(res.failed.map((f) => f.ack_id));
    done.forEach((ackId, i) => {
      if (trace) {
        lines[i].ack_sent_ns = sent.toString();
        lines[i].acked = !failed.has(ackId);
      }
      process.stdout.write(JSON.stringify(lines[i]) + "\n");
    });
  }
  return 0;
}

main().then((code) => process.exit(code));
