{{/* Names and labels. `fullname` is the release name when it already holds the chart's name
(release `airflow-t9k`: objects `airflow-t9k-controller`, ...), else <release>-airflow-t9k. */}}
{{- define "airflow-t9k.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "airflow-t9k.controller" -}}
{{- printf "%s-controller" (include "airflow-t9k.fullname" .) -}}
{{- end -}}

{{- define "airflow-t9k.serviceAccountName" -}}
{{- default (include "airflow-t9k.controller" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "airflow-t9k.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
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
app.kubernetes.io/name: {{ .Chart.Name }}
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
{{- if not (has .Values.controller.queueing (list "auto" "kueue" "off")) -}}
{{- fail (printf "controller.queueing must be auto, kueue or off (got %q)" .Values.controller.queueing) -}}
{{- end -}}
{{- end -}}
