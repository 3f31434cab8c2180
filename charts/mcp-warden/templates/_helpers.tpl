{{/*
Names, labels and images shared by every template.
*/}}

{{/* The chart name (nameOverride wins). */}}
{{- define "mcp-warden.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full name: fullnameOverride, else the release name when it contains the chart name, else `<release>-<chart>`. */}}
{{- define "mcp-warden.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "mcp-warden.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The namespace everything namespaced goes into. */}}
{{- define "mcp-warden.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* Labels on every object (commonLabels cannot override the chart's own). */}}
{{- define "mcp-warden.labels" -}}
{{- $own := dict
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
  "app.kubernetes.io/name" (include "mcp-warden.name" .)
  "app.kubernetes.io/part-of" "mcp-warden"
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/managed-by" .Release.Service -}}
{{- toYaml (merge $own (deepCopy .Values.commonLabels)) -}}
{{- end -}}

{{/*
The operator pods' selector: `app.kubernetes.io/name: <name>-operator`
(`mcp-warden-operator` unless `nameOverride`) and the release. Every
MCPServer's NetworkPolicy admits the operator's pods to the facades' :9090 by
these labels (operator/RBAC.md §2), which the Deployment hands the operator
in MCP_WARDEN_OPERATOR_POD_LABELS.
*/}}
{{- define "mcp-warden.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-operator" (include "mcp-warden.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of the operator's objects: common + selector + component. */}}
{{- define "mcp-warden.operatorLabels" -}}
{{- $own := merge (include "mcp-warden.selectorLabels" . | fromYaml) (dict "app.kubernetes.io/component" "operator") -}}
{{- toYaml (merge $own (include "mcp-warden.labels" . | fromYaml)) -}}
{{- end -}}

{{/* The operator pods' labels: podLabels, overridden by the chart's own. */}}
{{- define "mcp-warden.podLabels" -}}
{{- toYaml (merge (include "mcp-warden.operatorLabels" . | fromYaml) (deepCopy .Values.podLabels)) -}}
{{- end -}}

{{/* The operator's ServiceAccount name. */}}
{{- define "mcp-warden.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "mcp-warden.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* `registry/repository:tag@digest` of an image block; the tag defaults to appVersion. */}}
{{- define "mcp-warden.image" -}}
{{- $img := index . 0 -}}
{{- $root := index . 1 -}}
{{- $ref := printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) -}}
{{- if $img.registry -}}{{- $ref = printf "%s/%s" $img.registry $ref -}}{{- end -}}
{{- if $img.digest -}}{{- $ref = printf "%s@%s" $ref $img.digest -}}{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* Webhook names (operator/RBAC.md §4; passed to the operator by env). */}}
{{- define "mcp-warden.webhookServiceName" -}}
{{- printf "%s-webhook" (include "mcp-warden.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mcp-warden.webhookConfigName" -}}
{{- include "mcp-warden.fullname" . -}}
{{- end -}}

{{- define "mcp-warden.webhookSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "mcp-warden.fullname" .)) .Values.webhook.tls.secretName -}}
{{- end -}}

{{/* `k=v,k2=v2` from a map (sorted keys, as the operator's --*-labels flags take it). */}}
{{- define "mcp-warden.labelPairs" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* Common labels + `app.kubernetes.io/component: <name>`: (list $ "dashboard"). */}}
{{- define "mcp-warden.componentLabels" -}}
{{- $ := index . 0 -}}
{{- toYaml (merge (dict "app.kubernetes.io/component" (index . 1)) (include "mcp-warden.labels" $ | fromYaml)) -}}
{{- end -}}

{{/* `CIDR:PORT,…` from observability.egress (the operator's --facade-telemetry-egress). */}}
{{- define "mcp-warden.telemetryEgress" -}}
{{- $pairs := list -}}
{{- range . -}}{{- $pairs = append $pairs (printf "%s:%d" .cidr (int .port)) -}}{{- end -}}
{{- join "," $pairs -}}
{{- end }}
