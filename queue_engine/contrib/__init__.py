"""Integrations with other tools, each optional: `otel` (OpenTelemetry) and `sentry`."""
