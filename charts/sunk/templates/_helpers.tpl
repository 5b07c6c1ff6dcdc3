{{- define "sunk.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{ else }}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{ end }}
{{- end }}

{{- define "sunk.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Selector labels of one component (host, slurmctld, slurmrestd). */}}
{{- define "sunk.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Pods whose spec.schedulerName is this are scheduled through Slurm: SUNK's <namespace>-<release>. */}}
{{- define "sunk.schedulerName" -}}
{{- .Values.scheduler.name | default (printf "%s-%s" .Release.Namespace .Release.Name) -}}
{{- end }}

{{- define "sunk.nodesetNamespace" -}}
{{- .Values.nodesetController.namespace | default .Release.Namespace -}}
{{- end }}

{{/* Namespaces the scheduler watches with scope `namespace`. */}}
{{- define "sunk.watchNamespaces" -}}
{{- $namespaces := list .Release.Namespace }}
{{- range .Values.scope.namespaces }}{{ $namespaces = append $namespaces . }}{{ end }}
{{- $namespaces | uniq | join "," -}}
{{- end }}

{{/* Non-empty when a tenancy grant selects namespaces by label. */}}
{{- define "sunk.selectsNamespacesByLabel" -}}
{{- range .Values.tenancy.grants }}{{ if .namespaceSelector }}yes{{ end }}{{ end -}}
{{- end }}

{{/* The chart's own Slurm: Service names (the slurmctld Service name is also slurmctld's host name). */}}
{{- define "sunk.slurmctld" -}}{{ include "sunk.fullname" . }}-slurmctld{{- end }}
{{/* With controller.backup: the backup slurmctld's StatefulSet and Service, and its one pod (whose
name is its host name, the second SlurmctldHost). */}}
{{- define "sunk.slurmctldBackup" -}}{{ include "sunk.slurmctld" . }}-backup{{- end }}
{{- define "sunk.slurmctldBackupPod" -}}{{ include "sunk.slurmctldBackup" . }}-0{{- end }}
{{- define "sunk.slurmrestd" -}}{{ include "sunk.fullname" . }}-slurmrestd{{- end }}
{{- define "sunk.slurmdbd" -}}{{ include "sunk.fullname" . }}-slurmdbd{{- end }}
{{- define "sunk.mariadb" -}}{{ include "sunk.fullname" . }}-mariadb{{- end }}
{{- define "sunk.login" -}}{{ include "sunk.fullname" . }}-login{{- end }}
{{/* With slurmCluster.nodeDns: the headless Service over every slurmd pod, their subdomain. */}}
{{- define "sunk.slurmdService" -}}{{ include "sunk.fullname" . }}-slurmd{{- end }}
{{- define "sunk.homeClaim" -}}
{{- .Values.slurmCluster.home.existingClaim | default (printf "%s-home" (include "sunk.fullname" .)) }}
{{- end }}
{{/* The database slurmdbd keeps accounts in: an external one, or the chart's MariaDB. */}}
{{- define "sunk.databaseHost" -}}
{{- .Values.slurmCluster.accounting.database.host | default (include "sunk.mariadb" .) }}
{{- end }}
{{- define "sunk.databasePasswordSecret" -}}
{{- .Values.slurmCluster.accounting.database.passwordSecret | default (printf "%s-database" (include "sunk.fullname" .)) }}
{{- end }}
{{- define "sunk.svcDomain" -}}{{ .Release.Namespace }}.svc.{{ .Values.slurmCluster.clusterDomain }}{{- end }}
{{- define "sunk.clusterName" -}}
{{- .Values.slurmCluster.clusterName | default .Release.Name | lower | trunc 40 -}}
{{- end }}

{{/* The Secrets with the Slurm keys: the user's, or the chart's own. */}}
{{- define "sunk.slurmKeySecret" -}}
{{- if .Values.slurmCluster.enabled }}{{ .Values.slurmCluster.keys.slurmKey.existingSecret | default (printf "%s-slurm-key" (include "sunk.fullname" .)) }}{{ else }}{{ .Values.slurm.keySecret }}{{ end }}
{{- end }}
{{- define "sunk.jwtKeySecret" -}}
{{- if .Values.slurmCluster.enabled }}{{ .Values.slurmCluster.keys.jwtKey.existingSecret | default (printf "%s-jwt-key" (include "sunk.fullname" .)) }}{{ else }}{{ .Values.slurm.jwtKeySecret }}{{ end }}
{{- end }}

{{/* What the host connects to: the chart's Slurm, or the one in `slurm`. */}}
{{- define "sunk.slurmUrl" -}}
{{- if .Values.slurmCluster.enabled }}http://{{ include "sunk.slurmrestd" . }}.{{ include "sunk.svcDomain" . }}:6820{{ else }}{{ .Values.slurm.url }}{{ end }}
{{- end }}
{{/* slurmctld's host:port for configless clients (--conf-server): with a backup, both, primary first. */}}
{{- define "sunk.slurmctldAddress" -}}
{{- if .Values.slurmCluster.enabled }}{{ include "sunk.slurmctld" . }}.{{ include "sunk.svcDomain" . }}:6817
{{- if .Values.slurmCluster.controller.backup.enabled }},{{ include "sunk.slurmctldBackup" . }}.{{ include "sunk.svcDomain" . }}:6817{{ end }}
{{- else }}{{ .Values.slurm.slurmctldAddress }}{{ end }}
{{- end }}
{{- define "sunk.killWait" -}}
{{- if .Values.slurmCluster.enabled }}{{ .Values.slurmCluster.config.killWait }}{{ else }}{{ .Values.slurm.killWait }}{{ end }}
{{- end }}

{{- define "sunk.image" -}}
{{ .repository }}:{{ .tag }}
{{- end }}

{{/* Whether to render a ServiceMonitor: `auto` only when the Prometheus Operator's API exists. */}}
{{- define "sunk.serviceMonitor" -}}
{{- $mode := toString .Values.serviceMonitor.enabled }}
{{- if or (eq $mode "true") (and (eq $mode "auto") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor")) }}true{{ end }}
{{- end }}

{{/* Whether slurmctld serves Slurm's own metrics (slurmCluster.metrics): `auto` when the slurmctld
image's tag names Slurm 25.11 or later, which have MetricsType (24.11's slurmctld refuses the key). */}}
{{- define "sunk.slurmMetrics" -}}
{{- $metrics := .Values.slurmCluster.metrics }}
{{- $mode := toString $metrics.enabled }}
{{- if eq $mode "true" }}true
{{- else if eq $mode "auto" }}
{{- $version := regexFind "^v?[0-9]+\\.[0-9]+" (toString .Values.slurmCluster.images.slurmctld.tag) | trimPrefix "v" }}
{{- if $version }}
{{- $parts := splitList "." $version }}
{{- $major := atoi (index $parts 0) }}
{{- $minor := atoi (index $parts 1) }}
{{- if or (gt $major 25) (and (eq $major 25) (ge $minor 11)) }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Whether to render the ServiceMonitor of slurmctld's metrics: the chart's Slurm serves them and the
host's ServiceMonitor is rendered. */}}
{{- define "sunk.slurmServiceMonitor" -}}
{{- if and .Values.slurmCluster.enabled (include "sunk.slurmMetrics" .) (include "sunk.serviceMonitor" .) }}true{{ end }}
{{- end }}

{{/* gres.conf: slurmCluster.config.gresConf, after a global `AutoDetect=` line (config.gresAutoDetect)
where `gpu` is one of config.gresTypes, unless gresConf has a global AutoDetect line of its own (two
that differ stop slurmd). Where the driver shows no GPU (a CPU Node, a Node whose GPUs the kubelet only
advertises) Slurm detects none, and slurmd keeps the GPUs it registered with. */}}
{{- define "sunk.gresConf" -}}
{{- $config := .Values.slurmCluster.config }}
{{- $detect := $config.gresAutoDetect | default "off" }}
{{- if and (ne $detect "off") (has "gpu" $config.gresTypes) (not (regexMatch "(?im)^[ \\t]*AutoDetect[ \\t]*=" $config.gresConf)) }}
{{- printf "AutoDetect=%s\n" $detect }}
{{- end }}
{{- $config.gresConf }}
{{- end }}

{{/* Whether to render the PrometheusRule: `auto` only when the Prometheus Operator's API exists. */}}
{{- define "sunk.prometheusRule" -}}
{{- $mode := toString .Values.prometheusRule.enabled }}
{{- if or (eq $mode "true") (and (eq $mode "auto") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule")) }}true{{ end }}
{{- end }}

{{/* A Secret's data: kept from the live object across upgrades, else a new random 64-byte key or,
with `"ssh" true`, a new ECDSA P-256 key in PEM, which sshd and ssh read (users never see "host key
changed" after an upgrade). */}}
{{- define "sunk.keyData" -}}
{{- $existing := lookup "v1" "Secret" .root.Release.Namespace .name }}
{{- if and $existing $existing.data (index $existing.data .key) }}{{ index $existing.data .key }}
{{- else if .ssh }}{{ genPrivateKey "ecdsa" | b64enc }}
{{- else }}{{ randAscii 64 | b64enc }}{{ end }}
{{- end }}

{{/* The Slurm configuration files slurmctld, slurmrestd and the test pod read, as one projected volume. */}}
{{- define "sunk.slurmEtcVolume" -}}
- name: {{ .name }}
  projected:
    sources:
      - configMap:
          name: {{ include "sunk.fullname" .root }}-slurm-conf
      {{- if .keys }}
      - secret:
          name: {{ include "sunk.slurmKeySecret" .root }}
          items: [{key: slurm.key, path: slurm.key, mode: 0400}]
      - secret:
          name: {{ include "sunk.jwtKeySecret" .root }}
          items: [{key: jwt.key, path: jwt.key, mode: 0400}]
      {{- end }}
{{- end }}

{{/* Hook pods (helm test, pre-delete cleanup): bash scripts that reach Slurm through slurmrestd with a
JWT they sign with the cluster's key (files/slurm-api.sh). */}}
{{- define "sunk.hookEnv" -}}
- {name: SLURMRESTD, value: "{{ include "sunk.slurmrestd" . }}.{{ include "sunk.svcDomain" . }}:6820"}
- {name: JWT_KEY, value: /etc/sunk/jwt/jwt.key}
- {name: SLURM_USER, value: {{ .Values.slurm.user | quote }}}
{{- end }}
{{- define "sunk.hookMounts" -}}
- {name: scripts, mountPath: /etc/sunk/scripts, readOnly: true}
- {name: jwt-key, mountPath: /etc/sunk/jwt, readOnly: true}
{{- end }}
{{- define "sunk.hookVolumes" -}}
- name: scripts
  configMap: {name: {{ include "sunk.fullname" . }}-slurm-scripts}
- name: jwt-key
  secret:
    secretName: {{ include "sunk.jwtKeySecret" . }}
    items: [{key: jwt.key, path: jwt.key}]
    defaultMode: 0440
{{- end }}
{{/* Where the chart's hook and test pods run: where the host's pods may (`nodeSelector`,
`tolerations`). */}}
{{- define "sunk.hookPlacement" -}}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "sunk.hookSecurityContext" -}}
{runAsUser: 65534, runAsGroup: 65534, runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
{{- end }}

{{/* slurmCluster.identity.ldap: the nslcd sidecar of a Slurm pod, in the pod's own image (`image`): a
native sidecar, started before the pod's other init containers and up once its socket answers.
`requests` replaces its CPU and memory requests (a slurmd pod's request nothing: see nodesets.yaml). */}}
{{- define "sunk.nslcdSidecar" -}}
{{- if .root.Values.slurmCluster.identity.ldap.enabled }}
- name: nslcd
  image: {{ include "sunk.image" .image | quote }}
  imagePullPolicy: {{ .image.pullPolicy | default "IfNotPresent" }}
  restartPolicy: Always
  command: [sh, /etc/sunk/ldap/nslcd.sh]
  # Writes /etc/nslcd.conf, then nslcd drops to its own user.
  securityContext: {runAsUser: 0}
  startupProbe:
    exec: {command: [test, -S, /run/nslcd/socket]}
    periodSeconds: 1
    failureThreshold: 120
  resources: {requests: {{ .requests | default (dict "cpu" "5m" "memory" "8Mi") | toJson }}, limits: {memory: 64Mi}}
  volumeMounts:
    - {name: nslcd, mountPath: /run/nslcd}
    - {name: ldap-client, mountPath: /etc/sunk/ldap, readOnly: true}
    {{- if .root.Values.slurmCluster.identity.ldap.bindPasswordSecret }}
    - {name: ldap-bind, mountPath: /etc/sunk/ldap-bind, readOnly: true}
    {{- end }}
{{- end }}
{{- end }}

{{/* The mounts that send a container's user and group lookups to the pod's nslcd sidecar. */}}
{{- define "sunk.nslcdMounts" -}}
{{- if .Values.slurmCluster.identity.ldap.enabled }}
- {name: nslcd, mountPath: /run/nslcd}
- {name: ldap-client, mountPath: /etc/nsswitch.conf, subPath: nsswitch.conf, readOnly: true}
{{- end }}
{{- end }}

{{- define "sunk.nslcdVolumes" -}}
{{- if .Values.slurmCluster.identity.ldap.enabled }}
- {name: nslcd, emptyDir: {medium: Memory}}
- name: ldap-client
  configMap: {name: {{ include "sunk.fullname" . }}-ldap-client}
{{- with .Values.slurmCluster.identity.ldap.bindPasswordSecret }}
- name: ldap-bind
  secret: {secretName: {{ . }}, items: [{key: password, path: password}], defaultMode: 0400}
{{- end }}
{{- end }}
{{- end }}

{{/* The directory nslcd asks: the companion slapd's Service, or the site's. */}}
{{- define "sunk.ldapUri" -}}
{{- $ldap := .Values.slurmCluster.identity.ldap }}
{{- if $ldap.companion -}}
ldap://{{ include "sunk.fullname" . }}-ldap.{{ .Release.Namespace }}.svc.{{ .Values.slurmCluster.clusterDomain }}/
{{- else -}}
{{ required "slurmCluster.identity.ldap.uri: the site's directory (or companion: true)" $ldap.uri }}
{{- end }}
{{- end }}

{{- define "sunk.ldapBase" -}}
{{- $ldap := .Values.slurmCluster.identity.ldap }}
{{- if $ldap.companion -}}
dc=sunk
{{- else -}}
{{ required "slurmCluster.identity.ldap.base: the site's search base (or companion: true)" $ldap.base }}
{{- end }}
{{- end }}

{{/* The users tenancy grants name that the chart's Slurm does not declare (slurmCluster.identity.users,
     besides the images' root and nobody), one line each: slurmctld holds a job whose uid it cannot
     resolve. Said only where the chart knows Slurm's users: its own Slurm, with users from files or
     the companion directory (loaded from the same list); not with the site's directory, and not when
     grants are not applied (trustAnnotations). */}}
{{- define "sunk.undeclaredGrantUsers" -}}
{{- $cluster := .Values.slurmCluster }}
{{- $ldap := $cluster.identity.ldap }}
{{- $siteDirectory := and $ldap.enabled (not $ldap.companion) }}
{{- if and $cluster.enabled (not $siteDirectory) (not .Values.tenancy.trustAnnotations) }}
{{- $declared := list 0 65534 }}
{{- range $cluster.identity.users }}{{ $declared = append $declared (int .uid) }}{{ end }}
{{- $declared = uniq $declared }}
{{- $entries := list (dict "name" "tenancy.default" "grant" (.Values.tenancy.default | default dict)) }}
{{- range $i, $grant := .Values.tenancy.grants }}
{{- $name := printf "tenancy.grants[%d]" $i }}
{{- with $grant.namespaces }}{{ $name = printf "%s (namespaces %s)" $name (join ", " .) }}{{ end }}
{{- $entries = append $entries (dict "name" $name "grant" $grant) }}
{{- end }}
{{- range $entries }}
{{- $name := .name }}
{{- /* A grant that names no user runs placeholders as nobody, as the host reads it. */}}
{{- $user := 65534 }}
{{- if hasKey .grant "user" }}{{ $user = int .grant.user }}{{ end }}
{{- if not (has $user $declared) }}
  - {{ $name }}: user {{ $user }}
{{- end }}
{{- with .grant.userIds }}
{{- $bounds := splitList "-" . }}
{{- $first := atoi (first $bounds) }}
{{- $last := atoi (last $bounds) }}
{{- $inside := 0 }}
{{- range $declared }}{{ if and (ge . $first) (le . $last) }}{{ $inside = add1 $inside }}{{ end }}{{ end }}
{{- $size := add1 (sub $last $first) }}
{{- if lt $inside $size }}
  - {{ $name }}: userIds {{ . }}{{ if gt $size 1 }} ({{ sub $size $inside }} of its {{ $size }} uids){{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
