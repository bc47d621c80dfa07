import { useState } from "react";
import { Badge, Box, Button, Code, Flex, Heading, Table, Text } from "@chakra-ui/react";
import { duration, getJson, getText, palette, postJson, taskApi, usePoll, withQuery } from "./common.js";

const FINISHED = ["Succeeded", "Failed"];

function Section({ title, children }) {
  return (
    <Box mt={5}>
      <Heading size="md" mb={2}>
        {title}
      </Heading>
      {children}
    </Box>
  );
}

function Grid({ headers, rows, testId }) {
  return (
    <Table.Root size="sm" striped data-testid={testId}>
      <Table.Header>
        <Table.Row>
          {headers.map((h) => (
            <Table.ColumnHeader key={h}>{h}</Table.ColumnHeader>
          ))}
        </Table.Row>
      </Table.Header>
      <Table.Body>
        {rows.map((cells, i) => (
          <Table.Row key={i}>
            {cells.map((c, k) => (
              <Table.Cell key={k}>{c}</Table.Cell>
            ))}
          </Table.Row>
        ))}
      </Table.Body>
    </Table.Root>
  );
}

const ms = (t) => (t ? Date.parse(t) : NaN);

// Bars on one time axis: the job's conditions as they turned true, and each replica's run.
function Timeline({ job }) {
  const start = ms(job.created);
  const end = ms(job.ended) || Date.now();
  const span = Math.max(end - start, 1000);
  const pct = (t) => `${Math.min(100, Math.max(0, ((t - start) / span) * 100))}%`;
  const width = (a, b) => `${Math.max(0.5, ((Math.min(b, end) - a) / span) * 100)}%`;
  // The job's lane: waiting, then running, then paused or its final phase (conditions keep
  // only their last transition, so this is what can be drawn truthfully).
  const started = ms(job.started) || start;
  const pausedCond = job.conditions.find((c) => c.type === "Paused" && c.status === "True");
  const pausedAt = pausedCond ? ms(pausedCond.lastTransitionTime) : NaN;
  const jobBars = [];
  if (started > start) jobBars.push({ a: start, b: started, text: "Pending", phase: "Pending" });
  const runEnd = pausedAt || end;
  const finished = Boolean(job.ended);
  jobBars.push({ a: started, b: runEnd, text: finished ? `Running → ${job.phase}` : "Running", phase: finished ? job.phase : "Running" });
  if (pausedAt) jobBars.push({ a: pausedAt, b: end, text: "Paused", phase: "Paused" });
  const lanes = [
    { label: "job", bars: jobBars },
    ...job.replica_table.map((r) => ({
      label: `${r.type} ${r.rank ?? ""}`,
      bars: r.started ? [{ a: ms(r.started), b: ms(r.finished) || end, text: `${r.phase}${r.restarts ? ` ↻${r.restarts}` : ""}`, phase: r.phase }] : [],
    })),
  ];
  return (
    <Box data-testid="t9k-timeline">
      {lanes.map((lane) => (
        <Flex key={lane.label} align="center" mb={1} fontSize="xs">
          <Box w="110px" flexShrink={0}>
            {lane.label}
          </Box>
          <Box position="relative" h="18px" flex="1" bg="bg.muted" borderRadius="sm">
            {lane.bars.map((b, i) => (
              <Box
                key={i}
                position="absolute"
                left={pct(b.a)}
                width={width(b.a, b.b)}
                h="18px"
                bg={`${palette(b.phase)}.solid`}
                color={`${palette(b.phase)}.contrast`}
                borderRadius="sm"
                overflow="hidden"
                whiteSpace="nowrap"
                px={1}
                title={`${b.text}: ${new Date(b.a).toLocaleTimeString()}`}
              >
                {b.text}
              </Box>
            ))}
          </Box>
        </Flex>
      ))}
      <Text fontSize="xs" color="fg.muted">
        {new Date(start).toLocaleTimeString()} → {job.ended ? new Date(end).toLocaleTimeString() : "now"} ({duration(span / 1000)})
      </Text>
    </Box>
  );
}

// What the reporting replica printed (status.progress, docs/progress.md): the latest values and,
// for each metric, a small line chart of its history (inline SVG, no chart library).
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

const fmt = (v) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(4).replace(/\.?0+$/, "")) : "");

function Chart({ name, points, color }) {
  const W = 260;
  const H = 90;
  const P = 6;
  const data = points.filter((p) => typeof p.metrics[name] === "number").map((p) => [Date.parse(p.time), p.metrics[name]]);
  if (data.length === 0) return null;
  const xs = data.map((d) => d[0]);
  const ys = data.map((d) => d[1]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const x = (t) => P + (x1 > x0 ? ((t - x0) / (x1 - x0)) * (W - 2 * P) : (W - 2 * P) / 2);
  const y = (v) => H - P - (y1 > y0 ? ((v - y0) / (y1 - y0)) * (H - 2 * P) : (H - 2 * P) / 2);
  const path = data.map((d, i) => `${i ? "L" : "M"}${x(d[0]).toFixed(1)},${y(d[1]).toFixed(1)}`).join(" ");
  const last = data[data.length - 1];
  return (
    <Box data-testid="t9k-chart" data-metric={name} borderWidth="1px" borderRadius="md" p={2}>
      <Flex justify="space-between" fontSize="xs">
        <Text fontWeight="semibold">{name}</Text>
        <Text data-testid="t9k-chart-last">{fmt(last[1])}</Text>
      </Flex>
      <svg width={W} height={H} viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${name} over time`}>
        <line x1={P} y1={H - P} x2={W - P} y2={H - P} stroke="currentColor" strokeOpacity="0.2" />
        <path d={path} fill="none" stroke={color} strokeWidth="2" data-points={data.length} />
        {data.length === 1 && <circle cx={x(last[0])} cy={y(last[1])} r="3" fill={color} />}
      </svg>
      <Flex justify="space-between" fontSize="xs" color="fg.muted">
        <Text>
          {fmt(y0)} – {fmt(y1)}
        </Text>
        <Text>
          {new Date(x0).toLocaleTimeString()} → {new Date(x1).toLocaleTimeString()}
        </Text>
      </Flex>
    </Box>
  );
}

// One metric over the task's runs, oldest first; a run flagged as a regression (regression_threshold)
// is a red dot, its words in the tooltip (docs/retraining.md, "A task's history").
function HistoryChart({ name, runs, color }) {
  const W = 300;
  const H = 90;
  const P = 8;
  const data = runs.map((r, i) => [i, r.metrics[name], r]).filter((d) => typeof d[1] === "number");
  if (data.length === 0) return null;
  const ys = data.map((d) => d[1]);
  const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const n = Math.max(runs.length - 1, 1);
  const x = (i) => P + (i / n) * (W - 2 * P);
  const y = (v) => H - P - (y1 > y0 ? ((v - y0) / (y1 - y0)) * (H - 2 * P) : (H - 2 * P) / 2);
  const path = data.map((d, i) => `${i ? "L" : "M"}${x(d[0]).toFixed(1)},${y(d[1]).toFixed(1)}`).join(" ");
  const flagged = data.filter((d) => (d[2].regressions || []).some((g) => g.metric === name));
  return (
    <Box data-testid="t9k-history-chart" data-metric={name} borderWidth="1px" borderRadius="md" p={2}>
      <Flex justify="space-between" fontSize="xs">
        <Text fontWeight="semibold">{name}</Text>
        <Text>{fmt(data[data.length - 1][1])}</Text>
      </Flex>
      <svg width={W} height={H} viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${name} over the task's runs`}>
        <path d={path} fill="none" stroke={color} strokeWidth="2" data-points={data.length} />
        {data.map((d) => (
          <circle key={d[0]} cx={x(d[0])} cy={y(d[1])} r="2.5" fill={color}>
            <title>{`${d[2].run_id}: ${fmt(d[1])}`}</title>
          </circle>
        ))}
        {flagged.map((d) => {
          const g = d[2].regressions.find((r) => r.metric === name);
          return (
            <circle key={`f${d[0]}`} cx={x(d[0])} cy={y(d[1])} r="5" fill="none" stroke="#d62728" strokeWidth="2"
              data-testid="t9k-history-flag" data-run={d[2].run_id}>
              <title>{`${d[2].run_id}: ${fmt(d[1])}, behind the best earlier run (${g.best_run}: ${fmt(g.best)}) by ${fmt(g.behind)}`}</title>
            </circle>
          );
        })}
      </svg>
      <Flex justify="space-between" fontSize="xs" color="fg.muted">
        <Text>
          {fmt(y0)} – {fmt(y1)}
        </Text>
        <Text>{runs.length} runs</Text>
      </Flex>
    </Box>
  );
}

// The task's last runs (XCom t9k_history, read from Airflow's records: it outlives the jobs).
function History({ api }) {
  const [state] = usePoll(() => getJson(withQuery(`${api.path}/history`, api.mi)), [api.path, api.mi], false);
  const runs = (state.data && state.data.runs) || [];
  if (state.error) return <Text color="fg.error">{state.error}</Text>;
  if (runs.length === 0) {
    return (
      <Text fontSize="sm" color="fg.muted" data-testid="t9k-history-empty">
        No run of this task has recorded its history yet.
      </Text>
    );
  }
  const ordered = [...runs].reverse();
  const names = [];
  for (const r of ordered) for (const k of Object.keys(r.metrics)) if (!names.includes(k)) names.push(k);
  const flag = (r, name) => (r.regressions || []).some((g) => g.metric === name);
  return (
    <Box data-testid="t9k-history">
      <Flex gap={3} wrap="wrap" mb={3}>
        {names.map((name, i) => (
          <HistoryChart key={name} name={name} runs={ordered} color={COLORS[i % COLORS.length]} />
        ))}
      </Flex>
      <Grid
        testId="t9k-history-table"
        headers={["Run", "Outcome", "Duration", "Queued", "GPU-h", "Wasted GPU-h", "GPU-h, all tries", "Restarts", ...names]}
        rows={runs.map((r) => [
          r.run_id,
          r.phase ? <Badge colorPalette={palette(r.phase)}>{r.phase}</Badge> : "",
          duration(r.wall_seconds),
          duration(r.queue_seconds),
          fmt(r.accelerator_hours),
          fmt(r.wasted_hours),
          fmt(r.task_accelerator_hours),
          r.restarts ?? "",
          ...names.map((name) => (
            <Text as="span" color={flag(r, name) ? "fg.error" : undefined} fontWeight={flag(r, name) ? "bold" : undefined}>
              {fmt(r.metrics[name])}
              {flag(r, name) ? " ▼" : ""}
            </Text>
          )),
        ])}
      />
    </Box>
  );
}

function Progress({ progress }) {
  const names = [];
  for (const p of progress.history) for (const n of Object.keys(p.metrics)) if (!names.includes(n)) names.push(n);
  const pct = typeof progress.percent === "number" ? progress.percent : null;
  return (
    <Box data-testid="t9k-progress">
      <Flex gap={3} align="center" wrap="wrap" fontSize="sm">
        <Text fontWeight="semibold" data-testid="t9k-progress-summary">
          {progress.summary || "reported"}
        </Text>
        {progress.eta && <Text data-testid="t9k-progress-eta">ETA {progress.eta}</Text>}
        <Text color="fg.muted">
          from {progress.replica}, {progress.reported_at || progress.updated}
        </Text>
      </Flex>
      {pct !== null && (
        <Box mt={2} h="8px" bg="bg.muted" borderRadius="sm" maxW="540px">
          <Box h="8px" w={`${pct}%`} bg="blue.solid" borderRadius="sm" />
        </Box>
      )}
      {Object.keys(progress.metrics).length > 0 && (
        <Text mt={2} fontSize="sm" data-testid="t9k-progress-metrics">
          {Object.entries(progress.metrics)
            .map(([k, v]) => `${k} ${fmt(v)}`)
            .join(" · ")}
        </Text>
      )}
      <Flex mt={2} gap={3} wrap="wrap">
        {names.map((n, i) => (
          <Chart key={n} name={n} points={progress.history} color={COLORS[i % COLORS.length]} />
        ))}
      </Flex>
    </Box>
  );
}

function LogPane({ api, pods, live }) {
  const [pod, setPod] = useState("");
  const chosen = pod || (pods[0] && pods[0].pod) || "";
  const [state] = usePoll(
    () => (chosen ? getText(withQuery(`${api.path}/log`, api.mi, `pod=${encodeURIComponent(chosen)}`, "lines=200")) : Promise.resolve("")),
    [chosen],
    live,
  );
  return (
    <Box>
      <label style={{ fontSize: 14 }}>
        Replica{" "}
        <select data-testid="t9k-log-pod" value={chosen} onChange={(e) => setPod(e.target.value)}>
          {pods.map((p) => (
            <option key={p.pod} value={p.pod}>
              {p.type} {p.rank} ({p.pod})
            </option>
          ))}
        </select>
      </label>
      {state.error && <Text color="fg.error">{state.error}</Text>}
      <Code data-testid="t9k-log" display="block" whiteSpace="pre-wrap" mt={2} p={3} maxH="360px" overflowY="auto" w="100%">
        {state.data || "(empty)"}
      </Code>
    </Box>
  );
}

// What the controller kept before clean-up deleted the pods (the job's evidence ConfigMap).
function Kept({ kept }) {
  return (
    <Box data-testid="t9k-kept">
      <Text fontSize="sm" color="fg.muted" mb={2}>
        The pods of these replicas are gone; the controller kept this at {kept.kept_at || "clean-up"} (phase {kept.phase || "?"}).
      </Text>
      {kept.replicas.map((r) => (
        <Box key={r.pod} mb={4} data-testid="t9k-kept-replica">
          <Flex gap={2} align="center" mb={1}>
            <Text fontWeight="semibold">{r.pod}</Text>
            {r.phase && <Badge colorPalette={palette(r.phase)}>{r.phase}</Badge>}
          </Flex>
          <Grid
            headers={["Container", "State", "Exit code", "Reason", "Termination message", "Finished"]}
            rows={r.containers.map((c) => [c.name, c.state, c.exit_code ?? "", c.reason, c.message, c.finished])}
          />
          {r.log != null && (
            <Code as="pre" data-testid="t9k-kept-log" display="block" whiteSpace="pre-wrap" mt={2} p={3} maxH="300px" overflowY="auto" w="100%">
              {r.log || "(empty)"}
            </Code>
          )}
        </Box>
      ))}
      {kept.events.length > 0 && (
        <Grid
          testId="t9k-kept-events"
          headers={["Time", "Type", "Reason", "Message", "Count"]}
          rows={kept.events.map((e) => [e.time, e.type, e.reason, e.message, e.count])}
        />
      )}
    </Box>
  );
}

function RootCause({ rc, testId }) {
  return (
    <Text data-testid={testId}>
      {rc.replica} failed first
      {rc.exit_code != null ? ` (exit code ${rc.exit_code})` : ""}
      {rc.finished ? ` at ${rc.finished}` : ""}
      {rc.permanent ? " · permanent" : ""}
      {rc.detail ? `: ${rc.detail}` : ""}
    </Text>
  );
}

const ATTEMPT_STATUS = {
  none: "submitted no job (or recorded none)",
  current: "the same job as this try (it reattached)",
  gone: "its job was deleted",
};

// The task's earlier tries: the job each ran (the task's own record), its phase, root cause and
// what the controller kept before clean-up.
function Attempts({ attempts }) {
  return (
    <Box data-testid="t9k-attempts">
      {attempts.map((a) => (
        <Box key={a.try} mb={4} data-testid="t9k-attempt">
          <Flex gap={2} align="center" wrap="wrap" mb={1}>
            <Text fontWeight="semibold">Try {a.try}</Text>
            {a.state && <Badge>{a.state}</Badge>}
            {a.name && (
              <Text fontSize="sm">
                {a.kind} {a.namespace}/{a.name}
              </Text>
            )}
            {a.phase && (
              <Badge colorPalette={palette(a.phase)} variant="solid" data-testid="t9k-attempt-phase">
                {a.phase}
              </Badge>
            )}
            {a.status !== "present" && (
              <Text fontSize="sm" color="fg.muted">
                {ATTEMPT_STATUS[a.status]}
              </Text>
            )}
          </Flex>
          {a.root_cause && <RootCause rc={a.root_cause} testId="t9k-attempt-root-cause" />}
          {a.kept && <Kept kept={a.kept} />}
        </Box>
      ))}
    </Box>
  );
}

function Actions({ api, job, onDone }) {
  const [result, setResult] = useState(null);
  const [replicas, setReplicas] = useState("");
  const act = (verb, body) => {
    const what = verb === "scale" ? `set expectedReplicas of ${job.name} to ${body.replicas}` : `${verb} ${job.kind} ${job.name}`;
    if (!window.confirm(`Really ${what}?`)) return;
    postJson(withQuery(`${api.path}/${verb}`, api.mi), body).then(
      (r) => {
        setResult({ ok: true, text: r.message });
        onDone();
      },
      (e) => setResult({ ok: false, text: String(e.message || e) }),
    );
  };
  return (
    <Box>
      <Flex gap={2} wrap="wrap" align="center">
        {job.can_pause && !job.paused && (
          <Button size="sm" variant="outline" data-testid="t9k-pause" onClick={() => act("pause")}>
            Pause
          </Button>
        )}
        {job.paused && (
          <Button size="sm" variant="outline" data-testid="t9k-resume" onClick={() => act("resume")}>
            Resume
          </Button>
        )}
        <Button size="sm" variant="outline" colorPalette="danger" data-testid="t9k-delete" onClick={() => act("delete")}>
          Delete
        </Button>
        {job.elastic && (
          <Flex gap={1} align="center">
            <input
              data-testid="t9k-replicas"
              type="number"
              min={job.elastic.minReplicas || 1}
              max={job.elastic.maxReplicas}
              placeholder={String(job.elastic.expectedReplicas ?? "")}
              value={replicas}
              onChange={(e) => setReplicas(e.target.value)}
              style={{ width: 70, border: "1px solid var(--chakra-colors-border)", borderRadius: 4, padding: "2px 6px" }}
            />
            <Button size="sm" variant="outline" data-testid="t9k-scale" onClick={() => act("scale", { replicas: Number(replicas) })}>
              Scale
            </Button>
          </Flex>
        )}
      </Flex>
      {result && (
        <Text mt={2} fontSize="sm" color={result.ok ? "fg.success" : "fg.error"} data-testid="t9k-action-result">
          {result.text}
        </Text>
      )}
    </Box>
  );
}

export default function T9kJobTab({ dagId, runId, taskId, mapIndex }) {
  const api = taskApi(dagId, runId, taskId, mapIndex);
  const [state, refresh] = usePoll(() => getJson(withQuery(api.path, api.mi)), [dagId, runId, taskId, mapIndex]);
  const job = state.data && state.data.job;
  const attempts = (state.data && state.data.attempts) || [];
  return (
    <Box p={4} data-testid="t9k-job">
      {state.error && (
        <Text color="fg.error" data-testid="t9k-error">
          {state.error}
        </Text>
      )}
      {state.loading && !state.data && <Text>Loading…</Text>}
      {state.data && !job && <Text data-testid="t9k-no-job">{state.data.message}</Text>}
      {state.data && !job && attempts.length > 0 && (
        <Section title="Earlier attempts">
          <Attempts attempts={attempts} />
        </Section>
      )}
      {job && (
        <>
          <Flex gap={3} align="center" wrap="wrap">
            <Heading size="lg">
              {job.kind} {job.namespace}/{job.name}
            </Heading>
            <Badge colorPalette={palette(job.phase)} variant="solid" data-testid="t9k-phase">
              {job.phase}
            </Badge>
            {job.paused && <Badge data-testid="t9k-paused">pause requested</Badge>}
            {job.overrun && (
              <Badge colorPalette="orange" variant="solid" title={job.overrun} data-testid="t9k-overrun">
                predicted overrun
              </Badge>
            )}
            <Text fontSize="sm" color="fg.muted">
              replicas running {job.replicas.running} · succeeded {job.replicas.succeeded} · failed {job.replicas.failed} · restarts{" "}
              {job.replicas.restarts} · duration {duration(job.duration_seconds)}
            </Text>
          </Flex>
          <Box mt={3}>
            <Actions api={api} job={job} onDone={refresh} />
          </Box>
          {job.progress && (
            <Section title="Progress">
              <Progress progress={job.progress} />
            </Section>
          )}
          <Section title="History of this task">
            <History api={api} />
          </Section>
          <Section title="Timeline">
            <Timeline job={job} />
          </Section>
          <Section title="Replicas">
            <Grid
              testId="t9k-replicas"
              headers={["Type", "Rank", "Pod", "Node", "Phase", "Restarts", "Exit code", "Reason"]}
              rows={job.replica_table.map((r) => [
                r.type,
                <span data-testid="t9k-rank">{r.rank ?? ""}</span>,
                r.pod,
                r.node,
                <Badge colorPalette={palette(r.phase)}>{r.phase}</Badge>,
                r.restarts,
                r.exit_code ?? "",
                r.reason,
              ])}
            />
          </Section>
          {job.root_cause && (
            <Section title="Root cause">
              <RootCause rc={job.root_cause} testId="t9k-root-cause" />
            </Section>
          )}
          {job.restart_history.length > 0 && (
            <Section title="Restart history">
              <Grid
                testId="t9k-restart-history"
                headers={["Time", "Replica", "Cause", "Exit code", "Counted"]}
                rows={job.restart_history.map((h) => [h.time, h.replica, h.cause, h.exit_code ?? "", h.counted ? "yes" : "no (not a failure)"])}
              />
            </Section>
          )}
          {job.kept && (
            <Section title="Kept at clean-up">
              <Kept kept={job.kept} />
            </Section>
          )}
          {attempts.length > 0 && (
            <Section title="Earlier attempts">
              <Attempts attempts={attempts} />
            </Section>
          )}
          <Section title="Conditions">
            <Grid
              testId="t9k-conditions"
              headers={["Type", "Status", "Reason", "Message", "Since"]}
              rows={job.conditions.map((c) => [c.type, c.status, c.reason, c.message, c.lastTransitionTime])}
            />
          </Section>
          <Section title="Events">
            {job.events.length === 0 ? (
              <Text>No Events (Kubernetes keeps them for an hour).</Text>
            ) : (
              <Grid
                testId="t9k-events"
                headers={["Time", "Type", "Reason", "Object", "Message", "Count"]}
                rows={job.events.map((e) => [e.time, e.type, e.reason, e.object, e.message, e.count])}
              />
            )}
          </Section>
          <Section title="Logs">
            <LogPane
              api={api}
              pods={[...job.replica_table, ...(job.kept ? job.kept.replicas.map((r) => ({ pod: r.pod, type: "kept", rank: "" })) : [])]}
              live={!FINISHED.includes(job.phase)}
            />
          </Section>
        </>
      )}
    </Box>
  );
}

globalThis["T9k Job"] = T9kJobTab;
globalThis.AirflowPlugin = T9kJobTab;
