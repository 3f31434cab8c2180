{{/*
The operator's permissions, as data: one rule per row of operator/RBAC.md §1
(the contract its code keeps in `operator/src/rbac.rs`). tests/chart checks the
rendered rules against that table — no verb more, none missing — so a new API
call is one new row here and one in RBAC.md.
*/}}

{{/* Cluster-wide: the operator watches and writes in every namespace. */}}
{{- define "mcp-warden.clusterRules" -}}
# The controllers' primary resources (servers, gateways) and the profiles they resolve.
- apiGroups: [mcpwarden.dev]
  resources: [mcpservers, mcpgateways, toolprofiles, sandboxprofiles]
  verbs: [get, list, watch]
# Status, written with server-side apply (the profiles': Valid, usedBy).
- apiGroups: [mcpwarden.dev]
  resources: [mcpservers/status, mcpgateways/status, toolprofiles/status, sandboxprofiles/status]
  verbs: [get, patch]
# Owned objects (server-side apply).
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, list, watch, create, patch]
# Owned; the egress proxy's clients file `mcp-warden-egress-clients` is deleted when no server needs the proxy.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, patch, delete]
# Owned: `<name>` and the headless `<name>-peers` (deleted when scaled back to one replica).
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch, delete]
# secretEnv content hashed for the approval digest (never kept), static-token existence (metadata), per-server peer keys, the webhook's own certificate;
# list/watch for a metadata-only watch (no values) that re-pends a server at once when a Secret its approval covers is edited.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create]
# The facade pods whose :9090/tools feed status.tools and whose addresses feed <name>-peers
# (patch: the list's hash as an annotation, so the kubelet refreshes the mounted list at once).
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, patch]
# The cluster's pod and Service ranges: egress into them is `network.egress.cluster`, broad egress excepts them.
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
- apiGroups: [networking.k8s.io]
  resources: [servicecidrs]
  verbs: [list]
# Owned; the egress proxy `mcp-warden-egress` (Deployment, NetworkPolicy) is deleted when no server needs it.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, delete]
# Owned `<name>-egress`: egress to approved host names, where Cilium or Calico serves a policy
# that can name hosts (a plain NetworkPolicy cannot); deleted when the approval goes.
- apiGroups: [cilium.io]
  resources: [ciliumnetworkpolicies]
  verbs: [get, create, patch, delete]
- apiGroups: [projectcalico.org]
  resources: [networkpolicies]
  verbs: [get, create, patch, delete]
# Owned `<name>` Ingress / HTTPRoute of spec.expose (a gateway's watched, so one deleted or
# edited by hand is put back at once); deleted when expose drops them.
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes]
  verbs: [get, list, watch, create, patch, delete]
# Owned `<name>` when replicas > 1 (deleted when scaled back).
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, delete]
# Events on MCPServers.
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# The webhook asks whether the requesting user may approve.
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- if eq .Values.webhook.tls.mode "self-generated" }}
# Self-generated certificate: the operator writes its CA into these two objects only.
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations, mutatingwebhookconfigurations]
  resourceNames: [{{ include "mcp-warden.webhookConfigName" . }}]
  verbs: [get, patch]
{{- end }}
# The service-account issuer's discovery document and JWKS (published for the facades).
- nonResourceURLs: [/.well-known/openid-configuration, /openid/v1/jwks]
  verbs: [get]
# Discovery: which of Cilium, Calico and Gateway API the cluster serves; a change re-reconciles
# every server (also granted by system:discovery).
- nonResourceURLs: [/apis/cilium.io/v2, /apis/projectcalico.org/v3, /apis/gateway.networking.k8s.io/v1]
  verbs: [get]
{{- end -}}

{{/* In the operator's namespace only: leader election. */}}
{{- define "mcp-warden.namespaceRules" -}}
# `create` cannot be narrowed by name; reads and renewals are narrowed to the one Lease.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [mcp-warden-operator]
  verbs: [get, update]
{{- end -}}


{{/* People's roles (operator/RBAC.md §5). */}}
{{- define "mcp-warden.approverRules" -}}
- apiGroups: [mcpwarden.dev]
  resources: [mcpservers/approval]
  verbs: [approve]
# `kubectl annotate` reads, then patches; no `update`, so nothing else changes (the webhook checks).
- apiGroups: [mcpwarden.dev]
  resources: [mcpservers]
  verbs: [get, patch]
{{- end -}}

{{- define "mcp-warden.editRules" -}}
- apiGroups: [mcpwarden.dev]
  resources: [mcpservers, mcpgateways, toolprofiles, sandboxprofiles]
  verbs: [create, delete, deletecollection, get, list, patch, update, watch]
{{- end -}}

{{- define "mcp-warden.viewRules" -}}
- apiGroups: [mcpwarden.dev]
  resources: [mcpservers, mcpservers/status, mcpgateways, mcpgateways/status, toolprofiles, toolprofiles/status, sandboxprofiles, sandboxprofiles/status]
  verbs: [get, list, watch]
{{- end -}}
