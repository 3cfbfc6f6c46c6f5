{{/* The chart name, or nameOverride. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every resource name: fullnameOverride, else the release name
when it contains the chart name, else <release>-<chart>. Installed as release
"sluice", the names are those of config/default.
*/}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sluice.managerName" -}}{{ include "sluice.fullname" . }}-manager{{- end }}
{{- define "sluice.webhookServiceName" -}}{{ include "sluice.fullname" . }}-webhook-service{{- end }}
{{- define "sluice.webhookSecretName" -}}{{ include "sluice.fullname" . }}-webhook-server-cert{{- end }}
{{- define "sluice.webhookCertificateName" -}}{{ include "sluice.fullname" . }}-webhook-serving-cert{{- end }}
{{- define "sluice.webhookCertDir" -}}/tmp/k8s-webhook-server/serving-certs{{- end }}
{{- define "sluice.redisName" -}}{{ include "sluice.fullname" . }}-redis{{- end }}

{{/* The MutatingWebhookConfiguration: cluster-scoped, one per release. */}}
{{- define "sluice.webhookConfigurationName" -}}{{ include "sluice.fullname" . }}-injector{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.managerName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sluice
{{- end }}

{{/* Selector labels of one component: (list $ "manager"). */}}
{{- define "sluice.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "sluice.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Labels of the objects of one component: (list $ "manager"). */}}
{{- define "sluice.componentLabels" -}}
{{ include "sluice.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/*
An image reference: (list $ .Values.images.manager). The digest wins over
the tag; the tag defaults to the chart's appVersion.
*/}}
{{- define "sluice.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $repository := $image.repository -}}
{{- with $root.Values.images.registry }}{{ $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}{{ end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end }}

{{/* The in-chart Redis, as the enforcers reach it from any namespace. */}}
{{- define "sluice.redisURL" -}}
redis://{{ include "sluice.redisName" . }}.{{ .Release.Namespace }}.svc:6379
{{- end }}

{{/* A map of labels as k=v,k2=v2, sorted: the manager's label flags. */}}
{{- define "sluice.labelPairs" -}}
{{- $pairs := list -}}
{{- range $k, $v := . }}{{ $pairs = append $pairs (printf "%s=%s" $k $v) }}{{ end -}}
{{- join "," $pairs -}}
{{- end }}

{{- define "sluice.ratelimitName" -}}{{ include "sluice.fullname" . }}-ratelimit{{- end }}
{{- define "sluice.ratelimitConfigDir" -}}/etc/sluice-ratelimit/config{{- end }}
{{- define "sluice.ratelimitPoliciesDir" -}}/etc/sluice-ratelimit/policies{{- end }}
{{- define "sluice.ratelimitAdminDir" -}}/etc/sluice-ratelimit/admin{{- end }}
{{- define "sluice.ratelimitTLSDir" -}}/etc/sluice-ratelimit/tls{{- end }}
{{- define "sluice.ratelimitClientCADir" -}}/etc/sluice-ratelimit/client-ca{{- end }}

{{- /*
The variable holding the Redis URL of the RateLimitPolicy named by the
argument, as the compiler names it: SLUICE_REDIS_URL_ and the name
upper-cased with '-' and '.' as '_', and for a name with '.' the first
eight hex digits of its SHA-256, upper-cased, after one more '_'.
*/ -}}
{{- define "sluice.redisURLEnv" -}}
SLUICE_REDIS_URL_{{ . | upper | replace "-" "_" | replace "." "_" }}{{ if contains "." . }}_{{ sha256sum . | trunc 8 | upper }}{{ end }}
{{- end }}
