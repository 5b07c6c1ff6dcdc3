{{/*
slurmctld's pod template, the primary's (the Deployment) or, with controller.backup, the backup's (a
StatefulSet of one pod, so that its pod has a name the primary's Role can grant). Arguments: root, and
role: primary | backup.

With a backup, the primary's container starts through files/slurmctld-primary.sh, which stops the
backup's pod through the API server first: a backup in control then saves the state on SIGTERM and
exits before the primary loads it. Slurm's own hand-back (the primary asking a backup in control for
it) is never needed, and on Slurm 26.05.5 it can hang the backup and lose the nodes' state.
*/}}
{{- define "sunk.slurmctldPodTemplate" -}}
{{- $root := .root }}
{{- $primary := eq .role "primary" }}
{{- /* The primary with a backup: it stops the backup's pod before it starts. */}}
{{- $stopsBackup := and $primary $root.Values.slurmCluster.controller.backup.enabled }}
{{- $controller := $root.Values.slurmCluster.controller }}
{{- $persistence := $controller.persistence }}
{{- $image := $root.Values.slurmCluster.images.slurmctld }}
{{- $fullname := include "sunk.fullname" $root }}
{{- $setupMounts := `
- {name: slurm-src, mountPath: /etc/slurm-src, readOnly: true}
- {name: etc, mountPath: /etc/slurm}
- {name: scripts, mountPath: /etc/slurm/scripts, readOnly: true}
- {name: state, mountPath: /var/spool/slurmctld}
- {name: run, mountPath: /run/slurmctld}
- {name: identity, mountPath: /etc/sunk/identity, readOnly: true}
- {name: resolved, mountPath: /etc/sunk/resolved}` }}
{{- /* The daemon's containers: the users and groups the init container resolved. */}}
{{- $mounts := printf "%s\n%s" $setupMounts `- {name: resolved, mountPath: /etc/passwd, subPath: passwd, readOnly: true}
- {name: resolved, mountPath: /etc/group, subPath: group, readOnly: true}` }}
{{- /* With identity.ldap, lookups beyond those files go to the pod's nslcd sidecar. */}}
{{- $mounts = printf "%s\n%s" $mounts (include "sunk.nslcdMounts" $root | trim) }}
metadata:
  labels:
    {{- include "sunk.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ if $primary }}slurmctld{{ else }}slurmctld-backup{{ end }}
  annotations:
    # The keys are read at start; a configuration change is applied in place by the sidecar.
    checksum/keys: {{ printf "%s/%s" (include "sunk.slurmKeySecret" $root) (include "sunk.jwtKeySecret" $root) | sha256sum | trunc 16 | quote }}
spec:
{{- if $primary }}
  # slurm.conf's SlurmctldHost: inside the pod this name is the pod, outside it is the Service. (The
  # backup's pod is named by its StatefulSet, which slurm.conf names too.)
  hostname: {{ include "sunk.slurmctld" $root }}
{{- end }}
  enableServiceLinks: false
{{- if $stopsBackup }}
  # Only the slurmctld container gets a token (the `api` volume), to stop the backup's pod.
  serviceAccountName: {{ include "sunk.slurmctld" $root }}
{{- end }}
  # Nothing else in it talks to the API server; a token would only be there for a Slurm job to find.
  automountServiceAccountToken: false
  securityContext: {seccompProfile: {type: RuntimeDefault}}
{{- with $root.Values.imagePullSecrets }}
  imagePullSecrets: {{- toYaml . | nindent 4 }}
{{- end }}
  # slurmctld saves its state on SIGTERM.
  terminationGracePeriodSeconds: 30
  initContainers:
    {{- include "sunk.nslcdSidecar" (dict "root" $root "image" $image) | nindent 4 }}
    - name: setup
      image: {{ include "sunk.image" $image | quote }}
      imagePullPolicy: {{ $image.pullPolicy }}
      command: [sh, /etc/slurm/scripts/slurm-setup.sh]
      securityContext: {runAsUser: 0}
      {{- if $root.Values.slurmCluster.accounting.enabled }}
      env:
        - {name: WAIT_FOR_SLURMDBD, value: "{{ include "sunk.slurmdbd" $root }}:6819"}
      {{- end }}
      resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}
      volumeMounts: {{- $setupMounts | trim | nindent 8 }}
  containers:
    - name: slurmctld
      image: {{ include "sunk.image" $image | quote }}
      imagePullPolicy: {{ $image.pullPolicy }}
      {{- if $stopsBackup }}
      command: [sh, /etc/slurm/scripts/slurmctld-primary.sh]
      env:
        - {name: BACKUP_POD, value: {{ include "sunk.slurmctldBackupPod" $root }}}
      {{- end }}
      ports:
        - {name: slurmctld, containerPort: 6817}
      # Ready when this pod's own slurmctld answers (with a backup, `scontrol ping` asks both).
      readinessProbe:
        exec: {command: [sh, -c, "scontrol ping | grep -q '^Slurmctld({{ .role }}) .* is UP'"]}
        periodSeconds: 3
        timeoutSeconds: 5
      livenessProbe:
        tcpSocket: {port: slurmctld}
        {{- if $stopsBackup }}
        # The port opens once the backup has stopped (files/slurmctld-primary.sh).
        initialDelaySeconds: 90
        {{- end }}
        periodSeconds: 10
        failureThreshold: 6
      resources: {{- toYaml $controller.resources | nindent 8 }}
      volumeMounts:
        {{- $mounts | trim | nindent 8 }}
        {{- if $stopsBackup }}
        - {name: api, mountPath: /var/run/secrets/sunk/api, readOnly: true}
        {{- end }}
    - name: reconfigure
      image: {{ include "sunk.image" $image | quote }}
      imagePullPolicy: {{ $image.pullPolicy }}
      command: [sh, /etc/slurm/scripts/slurmctld-reconfigure.sh]
      {{- if not $primary }}
      env:
        # The backup's sidecar keeps its files current, and reconfigures only while the primary is down.
        - {name: RECONFIGURE_ONLY_WITHOUT_PRIMARY, value: "true"}
      {{- end }}
      resources: {requests: {cpu: 5m, memory: 8Mi}, limits: {memory: 64Mi}}
      volumeMounts: {{- $mounts | trim | nindent 8 }}
  volumes:
    {{- include "sunk.nslcdVolumes" $root | nindent 4 }}
    {{- include "sunk.slurmEtcVolume" (dict "root" $root "keys" true "name" "slurm-src") | nindent 4 }}
    - name: identity
      configMap: {name: {{ $fullname }}-identity}
    - name: resolved
      emptyDir: {}
    - name: etc
      emptyDir: {}
    - name: run
      emptyDir: {medium: Memory}
    - name: scripts
      configMap: {name: {{ $fullname }}-slurm-scripts}
    - name: state
      {{- if $persistence.enabled }}
      persistentVolumeClaim: {claimName: {{ $persistence.existingClaim | default (printf "%s-slurmctld-state" $fullname) }}}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- if $stopsBackup }}
    - name: api
      projected:
        sources:
          - serviceAccountToken: {path: token, expirationSeconds: 3600}
          - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}
          - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}
    {{- end }}
{{- with $controller.nodeSelector }}
  nodeSelector: {{- toYaml . | nindent 4 }}
{{- end }}
{{- with $controller.tolerations }}
  tolerations: {{- toYaml . | nindent 4 }}
{{- end }}
{{- if $controller.affinity }}
  affinity: {{- toYaml $controller.affinity | nindent 4 }}
{{- else if not $primary }}
  # Away from the primary's Node where there is another: losing one Node then leaves a controller.
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels: {{- include "sunk.selector" (dict "root" $root "component" "slurmctld") | nindent 16 }}
{{- end }}
{{- end }}
