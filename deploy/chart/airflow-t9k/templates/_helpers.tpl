{{/* Names and labels, as `helm create` makes them. `name` is the chart's name or nameOverride.
`fullname`, which starts every resource name, is fullnameOverride, else the release name when it
already holds `name` (release `airflow-t9k`: objects `airflow-t9k-controller`, ...), else
<release>-<name>. 50 characters at most: the longest suffix (-controller-progress) still fits a
Service's 63. */}}
{{- define "airflow-t9k.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "airflow-t9k.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "airflow-t9k.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "airflow-t9k.controller" -}}
{{- printf "%s-controller" (include "airflow-t9k.fullname" .) -}}
{{- end -}}

{{- define "airflow-t9k.serviceAccountName" -}}
{{- default (include "airflow-t9k.controller" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "airflow-t9k.labels" -}}
app.kubernetes.io/name: {{ include "airflow-t9k.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: airflow-t9k
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "airflow-t9k.controllerLabels" -}}
{{ include "airflow-t9k.labels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "airflow-t9k.selectorLabels" -}}
app.kubernetes.io/name: {{ include "airflow-t9k.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "airflow-t9k.airflowLabels" -}}
{{ include "airflow-t9k.labels" . }}
app.kubernetes.io/component: airflow
{{- end -}}

{{- define "airflow-t9k.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) -}}
{{- end -}}

{{/* The progress push path (docs/progress.md, "The push path"): the Service in front of the
controllers' listener (a DNS label: 63 characters at most), the Secret with its TLS files (kept by
the controllers: `-progress-certs`; cert-manager's: `-progress-tls`), the names its certificate is
for, and the URL replicas are given. */}}
{{- define "airflow-t9k.progressService" -}}
{{- printf "%s-progress" (include "airflow-t9k.controller" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "airflow-t9k.progressSecret" -}}
{{- $suffix := ternary "certs" "tls" (eq .Values.progress.push.tls.source "controller") -}}
{{- default (printf "%s-progress-%s" (include "airflow-t9k.controller" .) $suffix) .Values.progress.push.tls.secretName -}}
{{- end -}}

{{- define "airflow-t9k.progressHosts" -}}
{{- $svc := include "airflow-t9k.progressService" . -}}
{{- printf "%s.%s.svc\n%s.%s.svc.cluster.local" $svc .Release.Namespace $svc .Release.Namespace -}}
{{- end -}}

{{- define "airflow-t9k.progressEndpoint" -}}
{{- printf "https://%s.%s.svc:%d" (include "airflow-t9k.progressService" .) .Release.Namespace (int .Values.progress.push.port) -}}
{{- end -}}

{{/* The controller's subject in every binding. */}}
{{- define "airflow-t9k.controllerSubject" -}}
- kind: ServiceAccount
  name: {{ include "airflow-t9k.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/* Fails the render on values that cannot work, naming the value. */}}
{{- define "airflow-t9k.validate" -}}
{{- $mode := .Values.scope.mode -}}
{{- if not (has $mode (list "selector" "namespaces" "all")) -}}
{{- fail (printf "scope.mode must be selector, namespaces or all (got %q)" $mode) -}}
{{- end -}}
{{- if and (eq $mode "namespaces") (not .Values.scope.namespaces) -}}
{{- fail "scope.mode=namespaces needs at least one namespace in scope.namespaces" -}}
{{- end -}}
{{- if and (eq $mode "namespaces") (has .Release.Namespace .Values.scope.namespaces) -}}
{{- fail (printf "scope.namespaces lists the release's own namespace %s: the controller never reconciles its own namespace" .Release.Namespace) -}}
{{- end -}}
{{- if and (eq $mode "selector") (not .Values.scope.selector) -}}
{{- fail "scope.mode=selector needs scope.selector (a label selector on Namespaces)" -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "more than one replica needs leaderElection.enabled: two controllers without a leader would both act on every job" -}}
{{- end -}}
{{- with .Values.progress.push -}}
{{- if .enabled -}}
{{- if eq .tls.source "helm" -}}
{{- fail "progress.push.tls.source=helm is gone (Helm's lookup and genCA made a new CA on every render without a cluster: helm template, Argo CD): use controller, the default, where the controllers keep the CA and certificate themselves (docs/progress.md, \"TLS\")" -}}
{{- end -}}
{{- if not (has .tls.source (list "controller" "secret" "certManager")) -}}
{{- fail (printf "progress.push.tls.source must be controller, secret or certManager (got %q)" .tls.source) -}}
{{- end -}}
{{- if and (eq .tls.source "controller") (ge (int .tls.certDays) (int .tls.caDays)) -}}
{{- fail "progress.push.tls.certDays must be less than progress.push.tls.caDays: a certificate ends with its CA" -}}
{{- end -}}
{{- if and (eq .tls.source "secret") (not .tls.secretName) -}}
{{- fail "progress.push.tls.source=secret needs progress.push.tls.secretName (a Secret with tls.crt, tls.key and ca.crt in the release's namespace)" -}}
{{- end -}}
{{- if and (eq .tls.source "certManager") (not .tls.certManager.issuerRef.name) -}}
{{- fail "progress.push.tls.source=certManager needs progress.push.tls.certManager.issuerRef (the name and kind of an Issuer or ClusterIssuer)" -}}
{{- end -}}
{{- if le (float64 $.Values.controller.progressInterval) 0.0 -}}
{{- fail "progress.push.enabled needs controller.progressInterval > 0: it bounds how often pushed values are written (or set progress.push.enabled=false)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not (has .Values.controller.queueing (list "auto" "kueue" "off")) -}}
{{- fail (printf "controller.queueing must be auto, kueue or off (got %q)" .Values.controller.queueing) -}}
{{- end -}}
{{- with .Values.jobPriority -}}
{{- if and .install.enabled .map -}}
{{- fail "jobPriority.install.enabled and jobPriority.map both map priorities to classes: give one" -}}
{{- end -}}
{{- if and .install.enabled (gt (int .install.from) (int .install.to)) -}}
{{- fail (printf "jobPriority.install.from (%d) is above jobPriority.install.to (%d)" (int .install.from) (int .install.to)) -}}
{{- end -}}
{{- if and .install.enabled (not (regexMatch "^[a-z0-9][-a-z0-9.]*$" .install.prefix)) -}}
{{- fail (printf "jobPriority.install.prefix %q must start a PriorityClass name (lower-case letters, digits, '-', '.')" .install.prefix) -}}
{{- end -}}
{{- if and .install.enabled (hasPrefix "system-" .install.prefix) -}}
{{- fail "jobPriority.install.prefix must not start with system-: those classes are the cluster's own components'" -}}
{{- end -}}
{{- if and .install.enabled (gt (sub (int .install.to) (int .install.from)) 999) -}}
{{- fail "jobPriority.install makes at most 1000 PriorityClasses: narrow from..to" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The controller's --priority-class-map: the installed classes', else jobPriority.map (empty: none). */}}
{{- define "airflow-t9k.priorityClassMap" -}}
{{- with .Values.jobPriority -}}
{{- if .install.enabled -}}
{{- printf "%d-%d=%s{priority}" (int .install.from) (int .install.to) .install.prefix -}}
{{- else -}}
{{- join "," .map -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The namespaces never reconciled beyond the cluster's own: scope.exclude and every namespace
Airflow's identities run in (airflow.rbac.tasks.subjects, airflow.rbac.ui.subjects). A job there
would put pods next to Airflow's own service accounts and Secrets. One per line, sorted, unique. */}}
{{- define "airflow-t9k.excludedNamespaces" -}}
{{- $out := list -}}
{{- range .Values.scope.exclude -}}
{{- $out = append $out . -}}
{{- end -}}
{{- range (concat .Values.airflow.rbac.tasks.subjects .Values.airflow.rbac.ui.subjects) -}}
{{- if .namespace -}}
{{- $out = append $out .namespace -}}
{{- end -}}
{{- end -}}
{{- $out | uniq | sortAlpha | join "\n" -}}
{{- end -}}
