"""GenericJob (seed 001): typed replicas, variable substitution, rules, services."""

from __future__ import annotations

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import InvalidSpec, JobKind, Obj, ReplicaSpec, Rule, parse_restart_policy
from airflow_t9k.kinds.variables import Context, referenced_ports, substitute_container

# Seed 001 prints its TF_CONFIG example (job generic-example) with $(service.port[http]) but no
# spec.service; its "暴露副本的服务" section gives the same job's spec.service as port http, 2222
# (also TensorFlow's usual port). A job without spec.service gets that port for the one name it uses.
IMPLIED_PORT = 2222


class GenericJob(JobKind):
    resource = RESOURCES["GenericJob"]
    # GenericJob has no runPolicy: its run settings (cleanUpPolicy) are fields of spec, as
    # batch/v1 Job's ttlSecondsAfterFinished and a Deployment's progressDeadlineSeconds are.
    ttl_path = ("ttlSecondsAfterFinished",)
    progress_deadline_path = ("progressDeadlineSeconds",)  # beside them too (docs/kinds.md)

    def replica_specs(self, job: Obj) -> list[ReplicaSpec]:
        out = []
        for i, raw in enumerate((job.get("spec") or {}).get("replicaSpecs") or []):
            if not isinstance(raw, dict) or not raw.get("type"):
                raise InvalidSpec(f"replicaSpecs[{i}].type is required")
            replicas = raw.get("replicas", 1)
            if not isinstance(replicas, int) or isinstance(replicas, bool):
                raise InvalidSpec(f"replicaSpecs[{i}].replicas must be an integer, got {replicas!r}")
            template = raw.get("template")
            if not isinstance(template, dict):
                raise InvalidSpec(f"replicaSpecs[{i}].template is required")
            out.append(ReplicaSpec(raw["type"], replicas, template, parse_restart_policy(raw.get("restartPolicy"))))
        if not out:
            raise InvalidSpec("spec.replicaSpecs must list at least one replica type")
        return out

    def success_rules(self, job: Obj) -> list[Rule]:
        rules = (job.get("spec") or {}).get("successRules")
        return list(rules) if rules else super().success_rules(job)

    def failure_rules(self, job: Obj) -> list[Rule]:
        rules = (job.get("spec") or {}).get("failureRules")
        return list(rules) if rules else super().failure_rules(job)

    def service_ports(self, job: Obj) -> list[Obj]:
        service = (job.get("spec") or {}).get("service")
        if service is not None:
            return list(service.get("ports") or [])
        return self.implied_ports(job)

    def implied_ports(self, job: Obj) -> list[Obj]:
        """Without ``spec.service``: the ports ``$(service.port[NAME])`` uses, from a container port
        of that name, else IMPLIED_PORT for a single undeclared name (seed 001's example)."""
        containers = [c for raw in (job.get("spec") or {}).get("replicaSpecs") or [] if isinstance(raw, dict)
                      for key in ("initContainers", "containers")
                      for c in ((raw.get("template") or {}).get("spec") or {}).get(key) or [] if isinstance(c, dict)]  # fmt: skip
        declared = {str(p["name"]): p.get("containerPort") for c in containers for p in c.get("ports") or []
                    if isinstance(p, dict) and p.get("name")}  # fmt: skip
        ports, undeclared = [], []
        for name in referenced_ports(containers):
            if isinstance(declared.get(name), int):
                ports.append({"name": name, "port": declared[name]})
            else:
                undeclared.append(name)
        if len(undeclared) > 1:
            raise InvalidSpec(f"$(service.port[...]) names ports {', '.join(undeclared)} that neither spec.service.ports nor a "
                              "container port declares; add spec.service.ports with their numbers")  # fmt: skip
        if undeclared and IMPLIED_PORT not in [p["port"] for p in ports]:
            ports.append({"name": undeclared[0], "port": IMPLIED_PORT})
        elif undeclared:
            raise InvalidSpec(f"$(service.port[{undeclared[0]}]) has no port: declare it in spec.service.ports")
        return ports

    def wants_services(self, job: Obj, rtype: str) -> bool:
        # Every replica gets its headless Service, port-less when spec.service gives no
        # ports: $(service.T[R].host) must resolve in DNS whether or not ports are exposed
        # (seed 001's own TF_CONFIG example has no spec.service).
        return True

    def validate(self, job: Obj) -> None:
        super().validate(job)
        ports = self.service_ports(job)
        for i, port in enumerate(ports):
            # The CRD requires both; a CRD applied by hand may not, and plan() must not crash.
            if not isinstance(port, dict) or not isinstance(port.get("name"), str) or not port.get("name"):
                raise InvalidSpec(f"spec.service.ports[{i}].name is required")
            number = port.get("port")
            if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
                raise InvalidSpec(f"spec.service.ports[{i}].port must be an integer in 1..65535, got {number!r}")
        names = [p["name"] for p in ports]
        if len(set(names)) != len(names):
            raise InvalidSpec("spec.service.ports has duplicate port names")

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        ctx = Context(
            job_name=job["metadata"]["name"],
            rtype=spec.type,
            rank=rank,
            replicas={s.type: s.replicas for s in self.replica_specs(job)},
            ports={p["name"]: p["port"] for p in self.service_ports(job)},
        )
        for key in ("initContainers", "containers"):
            for c in pod["spec"].get(key) or []:
                substitute_container(c, ctx, f"replicaSpecs[{spec.type}].template.spec.{key}[{c.get('name')}]")
