import { useState } from "react";
import { Badge, Box, Flex, Heading, Link, Table, Text } from "@chakra-ui/react";
import { duration, getJson, palette, tiPath, usePoll } from "./common.js";

const PHASES = ["", "Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown"];

function Select({ label, value, options, onChange, testId }) {
  return (
    <label style={{ display: "flex", gap: 6, alignItems: "center", fontSize: 14 }}>
      {label}
      <select
        data-testid={testId}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        style={{ border: "1px solid var(--chakra-colors-border)", borderRadius: 4, padding: "2px 6px", background: "transparent" }}
      >
        {options.map((o) => (
          <option key={o} value={o}>
            {o || "all"}
          </option>
        ))}
      </select>
    </label>
  );
}

// Accelerator-hours from status.usage (docs/usage.md): every resource name together, the
// split and the hours restarted attempts wasted in the tooltip; "…" while runs still count.
function UsageCell({ job }) {
  const u = job.usage;
  if (!u) return <Table.Cell data-testid={`job-usage-${job.name}`} />;
  const split = Object.entries(u.by_resource || {}).map(([k, v]) => `${k}: ${v} h`);
  const title = [...split, `wasted by restarts: ${u.wasted_hours} h`].join("\n");
  return (
    <Table.Cell title={title} data-testid={`job-usage-${job.name}`}>
      {u.accelerator_hours.toFixed(u.accelerator_hours < 10 ? 3 : 1)}
      {u.wasted_hours > 0 ? <Text as="span" color="fg.warning">{` (${u.wasted_hours.toFixed(3)} wasted)`}</Text> : ""}
      {u.running ? "…" : ""}
    </Table.Cell>
  );
}

function JobRow({ job }) {
  const t = job.task || {};
  const r = job.replicas || {};
  return (
    <Table.Row data-testid={`job-row-${job.name}`}>
      <Table.Cell>{job.kind}</Table.Cell>
      <Table.Cell>
        <Link color="fg.info" href={tiPath(t, "plugin/t9k-job")} data-testid={`job-link-${job.name}`}>
          {job.name}
        </Link>
      </Table.Cell>
      <Table.Cell>{job.namespace}</Table.Cell>
      <Table.Cell>
        <Link color="fg.info" href={`dags/${encodeURIComponent(t.dag_id)}`}>{t.dag_id}</Link>
      </Table.Cell>
      <Table.Cell>
        <Link color="fg.info" href={`dags/${encodeURIComponent(t.dag_id)}/runs/${encodeURIComponent(t.run_id)}`}>{t.run_id}</Link>
      </Table.Cell>
      <Table.Cell>
        <Link color="fg.info" href={tiPath(t)}>
          {t.task_id}
          {t.map_index >= 0 ? ` [${t.map_index}]` : ""}
        </Link>
      </Table.Cell>
      <Table.Cell>
        <Badge colorPalette={palette(job.phase)} variant="solid" data-testid={`job-phase-${job.name}`}>
          {job.phase}
        </Badge>
        {job.overrun && (
          <Badge ml={1} colorPalette="orange" title={job.overrun} data-testid={`job-overrun-${job.name}`}>
            predicted overrun
          </Badge>
        )}
      </Table.Cell>
      <Table.Cell title="running / succeeded / failed">
        {r.running} / {r.succeeded} / {r.failed}
      </Table.Cell>
      <Table.Cell>{r.restarts}</Table.Cell>
      <Table.Cell>{duration(job.age_seconds)}</Table.Cell>
      <Table.Cell>{duration(job.duration_seconds)}</Table.Cell>
      <ProgressCell progress={job.progress} name={job.name} />
      <UsageCell job={job} />
    </Table.Row>
  );
}

// What the job's reporting replica printed last (status.progress, docs/progress.md): the summary
// and ETA as `kubectl get` shows them, the latest metrics in the tooltip.
function ProgressCell({ progress, name }) {
  if (!progress) return <Table.Cell />;
  const metrics = Object.entries(progress.metrics || {})
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  return (
    <Table.Cell title={metrics} data-testid={`job-progress-${name}`}>
      {progress.summary || "…"}
      {progress.eta ? ` · ETA ${progress.eta}` : ""}
    </Table.Cell>
  );
}

export default function T9kJobsPage() {
  const [kind, setKind] = useState("");
  const [phase, setPhase] = useState("");
  const [dag, setDag] = useState("");
  const [state] = usePoll(() => getJson(kind ? `jobs?kind=${encodeURIComponent(kind)}` : "jobs"), [kind]);
  const all = (state.data && state.data.jobs) || [];
  const dags = ["", ...new Set(all.map((j) => j.task && j.task.dag_id))].sort();
  const kinds = ["", "GenericJob", "PyTorchTrainingJob", "TensorFlowTrainingJob", "XGBoostTrainingJob", "ColossalAIJob",
    "DeepSpeedJob", "MPIJob", "BeamJob", "AscendJob"];
  const shown = all.filter((j) => (!phase || j.phase === phase) && (!dag || (j.task && j.task.dag_id === dag)));
  return (
    <Box p={4} data-testid="t9k-jobs">
      <Flex justify="space-between" align="center" mb={3} wrap="wrap" gap={3}>
        <Heading size="lg">T9k Jobs</Heading>
        <Flex gap={4} wrap="wrap">
          <Select label="DAG" value={dag} options={dags} onChange={setDag} testId="filter-dag" />
          <Select label="Phase" value={phase} options={PHASES} onChange={setPhase} testId="filter-phase" />
          <Select label="Kind" value={kind} options={kinds} onChange={setKind} testId="filter-kind" />
        </Flex>
      </Flex>
      {state.error && (
        <Text color="fg.error" data-testid="t9k-error" mb={2}>
          {state.error}
        </Text>
      )}
      {state.loading && !state.data && <Text>Loading…</Text>}
      {state.data && (
        <Text fontSize="sm" color="fg.muted" mb={2} data-testid="t9k-count">
          {shown.length} of {all.length} jobs · updates every few seconds · last {state.updated && state.updated.toLocaleTimeString()}
        </Text>
      )}
      <Table.Root size="sm" striped>
        <Table.Header>
          <Table.Row>
            {["Kind", "Name", "Namespace", "DAG", "Run", "Task", "Phase", "Replicas R/S/F", "Restarts", "Age", "Duration", "Progress", "Accel-hours"].map((h) => (
              <Table.ColumnHeader key={h}>{h}</Table.ColumnHeader>
            ))}
          </Table.Row>
        </Table.Header>
        <Table.Body>
          {shown.map((j) => (
            <JobRow key={j.uid} job={j} />
          ))}
        </Table.Body>
      </Table.Root>
      {state.data && shown.length === 0 && <Text mt={3}>No T9k jobs of DAGs you may read match these filters.</Text>}
    </Box>
  );
}

// The Airflow UI imports this module and then reads the component from a global named after
// the react_app (falling back to AirflowPlugin); module exports are not used.
globalThis["T9k Jobs"] = T9kJobsPage;
globalThis.AirflowPlugin = T9kJobsPage;
