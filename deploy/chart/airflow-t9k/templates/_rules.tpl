{{/*
The controller's rights: every rule the code uses, and nothing more (docs/install.md, "What each
right is for"). One place for both scopes: the namespaced rules go into a ClusterRole (scope
selector or all) or into a Role per namespace (scope namespaces); the cluster-scoped reads always
go into a ClusterRole. tests/unit/deploy/test_chart_render.py checks every variant against them.
*/}}
{{- define "airflow-t9k.controllerRules" -}}
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - genericjobs
  - pytorchtrainingjobs
  - tensorflowtrainingjobs
  - xgboosttrainingjobs
  - colossalaijobs
  - deepspeedjobs
  - mpijobs
  - beamjobs
  verbs:
  - get
  - list
  - watch
  # A job that names a job template (spec.templateRef) gets the template merged into its spec,
  # written once, before anything of it exists (docs/templates.md). Nothing else writes a job.
  - update
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - genericjobs/status
  - pytorchtrainingjobs/status
  - tensorflowtrainingjobs/status
  - xgboosttrainingjobs/status
  - colossalaijobs/status
  - deepspeedjobs/status
  - mpijobs/status
  - beamjobs/status
  verbs:
  - get
  - update
  - patch
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - genericjobs/finalizers
  - pytorchtrainingjobs/finalizers
  - tensorflowtrainingjobs/finalizers
  - xgboosttrainingjobs/finalizers
  - colossalaijobs/finalizers
  - deepspeedjobs/finalizers
  - mpijobs/finalizers
  - beamjobs/finalizers
  verbs:
  - update
- apiGroups:
  - mindxdl.gitee.com
  resources:
  - ascendjobs
  verbs:
  - get
  - list
  - watch
  - update  # a job template merged into the spec, once (docs/templates.md)
- apiGroups:
  - mindxdl.gitee.com
  resources:
  - ascendjobs/status
  verbs:
  - get
  - update
  - patch
- apiGroups:
  - mindxdl.gitee.com
  resources:
  - ascendjobs/finalizers
  verbs:
  - update
# Job templates (docs/templates.md): read when a job names one, never written.
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - t9kjobtemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ''
  resources:
  - pods
  - services
  - configmaps
  verbs:
  - get
  - list
  - watch
  - create
  - delete
# A DeepSpeed Elastic job's hostfile ConfigMap, patched when its workers are rescaled (docs/kinds.md);
# no other ConfigMap of a job is ever changed.
- apiGroups:
  - ''
  resources:
  - configmaps
  verbs:
  - patch
# In-place restarts (docs/disruptions.md): the controller lets a restart the kubelet holds run, or
# asks a replica's agent to restart its pod, by patching the pod's annotations; nothing else of a
# pod is ever patched.
- apiGroups:
  - ''
  resources:
  - pods
  verbs:
  - patch
# Secrets: create only. The controller makes one SSH key Secret per MPI, DeepSpeed and
# ColossalAI job and never reads, lists, watches, updates or deletes any (RBAC cannot limit
# reads to the Secrets it made: a label selector is not a permission). The job's status
# records the Secret it made; garbage collection removes it with its job (ownerReferences).
- apiGroups:
  - ''
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - batch
  resources:
  - jobs
  verbs:
  - get
  - list
  - watch
  - create
  - delete
# Volcano (docs/kinds.md, AscendJob): each AscendJob owns one PodGroup where Volcano is served.
- apiGroups:
  - scheduling.volcano.sh
  resources:
  - podgroups
  verbs:
  - get
  - list
  - watch
  - create
  - delete
# Gang scheduling without add-ons (docs/queueing.md): each multi-pod job that neither Kueue nor
# Volcano admits owns one PodGroup of Kubernetes' Workload API (scheduling.k8s.io/v1alpha2) where
# the API server serves it; created, read back once by name (ownership check), watched, deleted.
- apiGroups:
  - scheduling.k8s.io
  resources:
  - podgroups
  verbs:
  - get
  - list
  - watch
  - create
  - delete
# Kueue (docs/queueing.md): each queued job owns one Workload; the controller writes its status
# only to release a reservation after an eviction and to mark it Finished.
- apiGroups:
  - kueue.x-k8s.io
  resources:
  - workloads
  verbs:
  - get
  - list
  - watch
  - create
  - delete
- apiGroups:
  - kueue.x-k8s.io
  resources:
  - workloads/status
  verbs:
  - update
- apiGroups:
  - kueue.x-k8s.io
  resources:
  - localqueues
  verbs:
  - get
  - list
  - watch
# DRA (docs/usage.md): the devices a replica's claims from a ResourceClaimTemplate ask for are
# counted in status.usage; templates are read, never written.
- apiGroups:
  - resource.k8s.io
  resources:
  - resourceclaimtemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ''
  resources:
  - events
  verbs:
  - create
  - patch
  - list  # a finished job's Events go into its evidence ConfigMap (docs/disruptions.md)
# A finished job's pods' last log lines, kept before clean-up deletes the pods; and the reporting
# replica's log, followed for T9K_PROGRESS lines (status.progress, docs/progress.md).
- apiGroups:
  - ''
  resources:
  - pods/log
  verbs:
  - get
{{- end -}}

{{- define "airflow-t9k.controllerClusterRules" -}}
# The controller reads its CRDs at start: it refuses to run beside the T9k platform's own.
- apiGroups:
  - apiextensions.k8s.io
  resources:
  - customresourcedefinitions
  verbs:
  - get
  resourceNames:
  - genericjobs.batch.tensorstack.dev
  - pytorchtrainingjobs.batch.tensorstack.dev
  - tensorflowtrainingjobs.batch.tensorstack.dev
  - xgboosttrainingjobs.batch.tensorstack.dev
  - colossalaijobs.batch.tensorstack.dev
  - deepspeedjobs.batch.tensorstack.dev
  - mpijobs.batch.tensorstack.dev
  - beamjobs.batch.tensorstack.dev
  - ascendjobs.mindxdl.gitee.com
  - t9kjobtemplates.batch.tensorstack.dev
  - clustert9kjobtemplates.batch.tensorstack.dev
# Cluster-wide job templates (ClusterT9kJobTemplate, cluster-scoped), read like the namespaced ones.
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - clustert9kjobtemplates
  verbs:
  - get
  - list
  - watch
# Kueue's cluster-scoped settings: flavors (node labels, tolerations) and priority classes.
- apiGroups:
  - kueue.x-k8s.io
  resources:
  - resourceflavors
  - workloadpriorityclasses
  verbs:
  - get
  - list
  - watch
# PriorityClasses: Kueue's priorities, and the classes --priority-class-map names (jobPriority:
# whether the class a job's t9kScheduler priority maps to exists, and its value).
- apiGroups:
  - scheduling.k8s.io
  resources:
  - priorityclasses
  verbs:
  - get
  - list
  - watch
# In-place restarts: whether every node declares RestartAllContainersOnContainerExits
# (status.declaredFeatures), listed once when the controller starts; and, with avoidBadNodes, the
# nodes' health watched (Ready, cordoned, the platform's own conditions); never written.
- apiGroups:
  - ''
  resources:
  - nodes
  verbs:
  - list
{{- if .Values.controller.avoidBadNodes }}
  - watch
{{- end }}
{{- end -}}

{{/* Airflow's workers and triggerer: submit, watch, pause and delete jobs; read what a task log shows. */}}
{{- define "airflow-t9k.tasksRules" -}}
# The jobs themselves: submit, read, list and watch (sensor, trigger, synchronous wait),
# patch (pause on kill, resume), delete (delete_on_finish, on_kill_action="delete").
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - genericjobs
  - pytorchtrainingjobs
  - tensorflowtrainingjobs
  - xgboosttrainingjobs
  - colossalaijobs
  - deepspeedjobs
  - mpijobs
  - beamjobs
  verbs: [create, get, list, watch, patch, delete]
- apiGroups:
  - mindxdl.gitee.com
  resources:
  - ascendjobs
  verbs: [create, get, list, watch, patch, delete]
# The job's Events, forwarded into the task log by the trigger and read on failure.
- apiGroups:
  - ''
  resources:
  - events
  verbs: [list, watch]
# Replica pods (the hook lists a job's pods) and the log tails of failed replicas.
# Nothing else: no Secrets, and pods are never created or deleted from Airflow.
- apiGroups:
  - ''
  resources:
  - pods
  verbs: [get, list]
- apiGroups:
  - ''
  resources:
  - pods/log
  verbs: [get]
{{- end -}}

{{/* The tasks' evidence reads, apart from tasksRules: in each namespace jobs go to, never
cluster-wide (a ClusterRoleBinding would give every DAG author every ConfigMap of the cluster). */}}
{{- define "airflow-t9k.evidenceRules" -}}
# The evidence ConfigMap `<job>-evidence` the controller keeps before clean-up deletes a
# finished job's pods (their last log lines, exit codes, Events), read by the task when the pods
# are gone. `get` by name only (RBAC cannot name them in advance): no list or watch, nothing is
# written, and a ConfigMap is used only when its controller ownerReference is the job's uid.
- apiGroups:
  - ''
  resources:
  - configmaps
  verbs: [get]
{{- end -}}

{{/* The Airflow UI's identity (the T9k Jobs page, the T9k Job tab): uiReadRules read and change
nothing; uiActionsRules (airflow.rbac.ui.actions) are the tab's Pause, Resume, Delete and Scale.
Without them the buttons answer with the right the API server refused. */}}
{{- define "airflow-t9k.uiReadRules" -}}
# The T9k Jobs page lists every kind (one LIST per kind, polled; no watch); the tab GETs the job.
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - genericjobs
  - pytorchtrainingjobs
  - tensorflowtrainingjobs
  - xgboosttrainingjobs
  - colossalaijobs
  - deepspeedjobs
  - mpijobs
  - beamjobs
  verbs: [get, list]
- apiGroups:
  - mindxdl.gitee.com
  resources:
  - ascendjobs
  verbs: [get, list]
# The tab's replicas (pods by job label), Events (by the job's uid) and replica logs.
- apiGroups:
  - ''
  resources:
  - pods
  verbs: [get, list]
- apiGroups:
  - ''
  resources:
  - events
  verbs: [list]
- apiGroups:
  - ''
  resources:
  - pods/log
  verbs: [get]
{{- end -}}

{{- define "airflow-t9k.uiActionsRules" -}}
# Pause and resume (a merge patch carrying the job's uid), delete (with a uid precondition).
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - genericjobs
  - pytorchtrainingjobs
  - tensorflowtrainingjobs
  - xgboosttrainingjobs
  - colossalaijobs
  - deepspeedjobs
  - mpijobs
  - beamjobs
  verbs: [patch, delete]
- apiGroups:
  - mindxdl.gitee.com
  resources:
  - ascendjobs
  verbs: [patch, delete]
# Scale an Elastic PyTorchTrainingJob or DeepSpeedJob (the scale subresource).
- apiGroups:
  - batch.tensorstack.dev
  resources:
  - pytorchtrainingjobs/scale
  - deepspeedjobs/scale
  verbs: [patch]
{{- end -}}
