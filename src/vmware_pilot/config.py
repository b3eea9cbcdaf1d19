"""Settings: the only reader of the environment. Built once at start-up, never at import."""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from vmware_pilot.safety.redaction import redact_text

__all__ = [
    "ENV_PREFIX",
    "LOG_LEVELS",
    "DispatchSettings",
    "GateSettings",
    "NetworkSettings",
    "Settings",
    "StoreSettings",
    "settings_problem",
    "unknown_settings",
]

ENV_PREFIX = "VMWARE_PILOT_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Names the project's own tooling uses beside the settings (tests/support/pg_server.py, scripts/pg-setup.sh).
_NOT_SETTINGS = f"{ENV_PREFIX}TEST_"
# A URL SQLAlchemy parses (its own pattern, with a numeric port) for the two databases Pilot
# stores workflows in; checked here so that every command refuses it in one line.
_DATABASE_URL = re.compile(
    r"(sqlite|postgresql)(\+\w+)?://"
    r"(?:[^:/]*(?::[^@]*)?@)?"  # user and password
    r"(?:\[[^/?]+\]|[^/:?]*)?(?::\d*)?"  # host and port
    r"(?:/[^?]*)?(?:\?.*)?",  # database and query
    re.IGNORECASE | re.DOTALL,
)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,30}")


def _shown_url(url: str) -> str:
    """``url`` for a refusal: whatever stands before its last ``@`` (a login, a password, a
    token, however it is written) shown as ``***``, the rest masked as text, at most 200
    characters."""
    if "@" in url:
        scheme, sep, _ = url.partition("://")
        lead = f"{scheme}://" if sep and _SCHEME.fullmatch(scheme) else ""
        url = f"{lead}***@{url.rpartition('@')[2]}"
    shown = redact_text(url)
    return shown if len(shown) <= 200 else shown[:199] + "…"


class StoreSettings(BaseSettings):
    """Where Pilot keeps its state: the home, the database, templates and policies, run leases."""

    home: Path = Field(
        default_factory=lambda: Path("~/.vmware"),
        description="Pilot home folder: database, catalog cache, custom templates (mode 0700).",
    )
    database_url: str = Field(
        default="",
        description="SQLAlchemy database URL; empty means the SQLite file pilot.db in the home.",
    )
    lease_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a run's lease on a workflow lasts unrenewed (a dead replica's workflows free up).",
    )
    sweep_seconds: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="Servers with dispatch: seconds between looks for runs a stopped Pilot left, to continue them.",
    )
    database_pool_size: int = Field(
        default=5, ge=1, le=100, description="Connections each Pilot process keeps open to PostgreSQL."
    )
    database_pool_timeout: float = Field(
        default=10.0, gt=0, description="Seconds a call waits for a free database connection."
    )
    database_connect_timeout: int = Field(
        default=5, ge=1, description="Seconds to reach the PostgreSQL server before it counts as down."
    )
    database_statement_timeout: float = Field(
        default=30.0, gt=0, description="Seconds one PostgreSQL statement (or lock wait) may take."
    )
    templates_dir: Path | None = Field(
        default=None,
        description="Folder of custom YAML templates; empty means workflows/ in the home.",
    )
    policies: Path | None = Field(
        default=None,
        description="The policy file (deny, approvals, windows, conflicts); empty means policies.yaml in the "
        "home. Not read while a database URL is set (the policy is then the database's).",
    )

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str) -> str:
        url = value.strip()
        if url and not _DATABASE_URL.fullmatch(url):
            # The value is not echoed: a URL may carry a password.
            raise ValueError(
                "VMWARE_PILOT_DATABASE_URL is not a database URL Pilot can use: give "
                "postgresql+psycopg://USER@HOST:PORT/DATABASE or sqlite:////PATH/TO/pilot.db, or leave it "
                "empty for the SQLite file pilot.db in the home"
            )
        return url

    @property
    def home_path(self) -> Path:
        return self.home.expanduser()

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home_path / 'pilot.db'}"

    @property
    def resolved_templates_dir(self) -> Path:
        return (self.templates_dir or self.home_path / "workflows").expanduser()

    @property
    def resolved_policies_path(self) -> Path:
        return (self.policies or self.home_path / "policies.yaml").expanduser()

    @property
    def catalog_cache_path(self) -> Path:
        """Where `vmware-pilot catalog refresh` stores discovered skill tools."""
        return self.home_path / "catalog.json"


class DispatchSettings(BaseSettings):
    """How steps are run: dispatch to the skills' servers, the drift check, the twin."""

    skill_commands: dict[str, str] = Field(
        default_factory=dict,
        description="Skill → command line of its MCP server, overriding the vmware-<skill>-mcp search.",
    )

    dispatch: str = Field(
        default="",
        description="'stdio': Pilot runs each step in its skill's own MCP server; empty: hand steps back.",
    )
    dispatch_timeout: float = Field(
        default=1800.0,
        gt=0,
        description="Seconds a dispatched tool call may take before its effect is unknown.",
    )
    dispatch_start_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a skill server may take to start and finish the MCP handshake.",
    )
    dispatch_idle_seconds: float = Field(
        default=300.0, gt=0, description="An unused pooled skill session is closed after this many seconds."
    )
    dispatch_sessions: Literal["pooled", "per_call"] = Field(
        default="pooled", description="'pooled' reuses one server per skill; 'per_call' starts one per call."
    )
    dispatch_pool_size: int = Field(
        default=4, ge=1, le=32, description="Most sessions kept per skill (parallel groups use several)."
    )

    drift_check: Literal["writes", "off"] = Field(
        default="writes",
        description="'writes': right before each write step, read its targets again and hold the run at "
        "a gate when they are not what the approver saw; 'off': no such check.",
    )
    twin: Literal["auto", "off", "required"] = Field(
        default="auto",
        description="Rehearsal of a gate's released steps on a twin of the inventory: 'auto' (when a "
        "capture of the target and a simulator exist), 'off', or 'required' (a gate without one says unknown).",
    )
    twin_vcsim: str = Field(
        default="",
        description="The vcsim binary the twin runs (vcsim's -load/-l flags); empty: .lab/bin/vcsim-twin, "
        "then vcsim on PATH.",
    )
    twin_govc: str = Field(
        default="",
        description="The govc binary that captures (object.save) and overlays state (vm.power); empty: "
        ".lab/bin/govc-twin, then govc on PATH.",
    )
    twin_timeout: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="Seconds one rehearsal (start, overlay, steps, diff) may take.",
    )
    twin_max_age: float = Field(
        default=24.0, gt=0, description="Hours after which a capture is flagged as stale on the gate."
    )
    twin_memory_mb: int = Field(
        default=2048,
        ge=256,
        le=1048576,
        description="MiB of data (heap and stacks, RLIMIT_DATA) the twin's simulator may use; past it the "
        "simulator stops and the rehearsal is unknown, saying so.",
    )
    twin_username: str = Field(
        default="",
        description="Account `twin capture` logs in with; empty: the monitor skill's account for the target.",
    )
    twin_password: SecretStr = Field(
        default=SecretStr(""),
        description="Password of VMWARE_PILOT_TWIN_USERNAME (never logged); empty: the monitor skill's.",
    )

    @field_validator("dispatch")
    @classmethod
    def _check_dispatch(cls, value: str) -> str:
        mode = value.strip().lower()
        if mode not in ("", "stdio"):
            raise ValueError(
                f"VMWARE_PILOT_DISPATCH={value!r} is not understood: set it to 'stdio' for Pilot to run the "
                "steps itself, or leave it empty to hand the steps back to the agent"
            )
        return mode

    @field_validator("skill_commands")
    @classmethod
    def _check_skill_commands(cls, value: dict[str, str]) -> dict[str, str]:
        for skill, command in value.items():
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise ValueError(f"the command for skill {skill!r} cannot be parsed ({exc})") from None
            if not skill.strip() or not argv:
                raise ValueError(f"skill {skill!r} needs a non-empty skill name and command line")
        return value


class GateSettings(BaseSettings):
    """Gates and what they tell: who approves, expiry, notifications, watching."""

    approvals: Literal["agent", "elicit", "human"] = Field(
        default="agent",
        description="Who may approve through the MCP approve tool: 'agent' (the approver it names), "
        "'elicit' (the person, through an MCP form), 'human' (nobody: only `vmware-pilot approve`).",
    )
    gate_expiry_minutes: float = Field(
        default=1440.0,
        ge=0,
        le=60 * 24 * 366,
        description="Minutes a gate releasing a destructive step waits for approval before it expires "
        "(a plan's own expires_in_minutes applies when shorter); 0: no default expiry.",
    )
    notify_format: Literal["json", "slack", "teams"] = Field(
        default="json",
        description="Body of each notification: 'json' (Pilot's event), 'slack' (Block Kit for a Slack "
        "incoming webhook) or 'teams' (an Adaptive Card for a Teams incoming webhook).",
    )
    notify_url: str = Field(
        default="",
        description="http(s) URL that receives a signed JSON POST on awaiting_approval, completed, failed, "
        "rolled back and cancelled; empty: no notifications.",
    )
    notify_secret: SecretStr = Field(
        default=SecretStr(""),
        description="HMAC-SHA256 key for the X-Pilot-Signature header of notifications (never logged).",
    )

    request_state_keys: SecretStr = Field(
        default=SecretStr(""),
        description="Comma-separated secrets (each at least 32 characters) sealing the requestState a "
        "2026-07-28 client echoes across the rounds of one call: the first seals, every one unseals "
        "(rotation). Give every replica behind one address the same value (never logged); empty: "
        "a key of this process alone.",
    )

    notify_timeout: float = Field(
        default=5.0, gt=0, le=120, description="Seconds one notification attempt may take."
    )
    notify_attempts: int = Field(
        default=4, ge=1, le=10, description="Attempts per notification, with doubling backoff from 0.5 s."
    )
    notify_retention_hours: float = Field(
        default=168.0,
        gt=0,
        le=87600,
        description="Hours a delivered or dropped notification stays in the outbox before it is deleted.",
    )
    watch_interval: float = Field(
        default=1.0,
        ge=0.05,
        le=60,
        description="Seconds between checks of subscribed or listened-to workflows for changes (any "
        "process's); on 2026-07-28 also the ttlMs of reads of the templates and the catalog.",
    )

    @field_validator("request_state_keys")
    @classmethod
    def _check_request_state_keys(cls, value: SecretStr) -> SecretStr:
        keys = [k.strip() for k in value.get_secret_value().split(",")]
        if value.get_secret_value().strip() and (not all(keys) or any(len(k) < 32 for k in keys)):
            raise ValueError(
                "VMWARE_PILOT_REQUEST_STATE_KEYS needs secrets of at least 32 characters each, separated by "
                'commas (make one with: python3 -c "import secrets; print(secrets.token_hex(32))")'
            )
        return value

    @field_validator("notify_url")
    @classmethod
    def _check_notify_url(cls, value: str) -> str:
        url = value.strip()
        if not url:
            return url
        try:
            parts = urlsplit(url)
            hostname = parts.hostname
        except ValueError:  # an unreadable host or port: refused as not a URL
            parts, hostname = urlsplit(""), None
        if parts.scheme not in ("http", "https") or not hostname:
            raise ValueError(
                f"VMWARE_PILOT_NOTIFY_URL={_shown_url(url)!r} is not an http(s) URL with a host; set it to "
                "the receiver's address, e.g. https://hooks.example.com/pilot, or leave it empty"
            )
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                f"VMWARE_PILOT_NOTIFY_URL={_shown_url(url)!r} carries credentials (user:password@), which "
                "Pilot does not send as a login and would keep in clear; remove them and let the receiver "
                "check the X-Pilot-Signature header signed with VMWARE_PILOT_NOTIFY_SECRET"
            )
        return url


class NetworkSettings(BaseSettings):
    """The network transports: public URL, OAuth, the web console, HTTP limits, exposure."""

    public_url: str = Field(
        default="",
        description="Network transports: the URL clients reach this server at, e.g. https://pilot.example.com "
        "(behind a proxy, the proxy's); its /mcp is the OAuth resource. Empty: from --transport, the first "
        "--public-name and the port.",
    )
    console_session_minutes: float = Field(
        default=30.0,
        gt=0,
        le=1440,
        description="Web console: how long a sign-in lasts before the person must sign in again (minutes).",
    )
    oauth_issuer: str = Field(
        default="",
        description="OAuth: the issuer URL of the identity provider whose JWT access tokens are accepted "
        "(its /.well-known/openid-configuration gives the signing keys); empty: static tokens only.",
    )
    oauth_audience: str = Field(
        default="",
        description="OAuth: the audience (aud) an access token must name; empty: this server's resource "
        "URL (the public URL + /mcp).",
    )
    oauth_roles_claim: str = Field(
        default="groups",
        description="OAuth: the access-token claim listing the caller's groups (a dotted path such as "
        "realm_access.roles reaches into an object), mapped to roles by the roles file.",
    )
    oauth_scopes: str = Field(
        default="",
        description="OAuth: space- or comma-separated scopes every access token must carry, also announced "
        "to clients; empty: none required.",
    )
    console_oidc_client_id: str = Field(
        default="",
        description="Web console: the OpenID Connect client id the console signs people in with at "
        "VMWARE_PILOT_OAUTH_ISSUER (authorization code with PKCE); empty: token sign-in only.",
    )
    console_oidc_client_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Web console: that client's secret, for a confidential client; empty: a public client.",
    )
    console_oidc_scopes: str = Field(
        default="openid profile",
        description="Web console: the scopes the console asks for at sign-in (space-separated; openid is "
        "always added), e.g. `openid profile groups` when the groups claim needs its own scope.",
    )
    http_header_timeout: float = Field(
        default=15.0,
        gt=0,
        le=3600,
        description="Network transports: seconds a client has to finish the TLS handshake and to send a "
        "request's headers (from connecting, or from the next request's first byte); then it is cut off.",
    )
    http_body_timeout: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="Network transports: seconds a client has to send a request's body once its headers "
        "arrived; then the connection is closed.",
    )
    http_max_connections_per_client: int = Field(
        default=256,
        ge=1,
        description="Network transports: connections one client address may hold open; more get 503. "
        "Behind a proxy every client shares the proxy's address.",
    )

    mcp_expose: str = Field(
        default="all",
        description="MCP servers: which tools are offered, 'all' or 'read' (the four read tools); the "
        "--expose flag wins. Hidden tools are neither listed nor callable.",
    )
    mcp_allow_write: str = Field(
        default="",
        description="MCP servers with expose 'read': comma-separated write tools offered as well; the "
        "--allow-write flag wins.",
    )
    runaway_max: int = Field(
        default=25,
        ge=0,
        description="Identical write calls (same tool, arguments and caller) allowed within "
        "VMWARE_PILOT_RUNAWAY_WINDOW_SEC; more are refused. Reads are never refused; 0: no limit.",
    )
    runaway_window_sec: float = Field(
        default=120.0,
        gt=0,
        le=86400,
        description="Seconds over which identical write calls are counted for VMWARE_PILOT_RUNAWAY_MAX.",
    )

    @field_validator("public_url", "oauth_issuer")
    @classmethod
    def _check_urls(cls, value: str, info: ValidationInfo) -> str:
        url = value.strip()
        if not url:
            return url
        parts = urlsplit(url)
        loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
        name = f"{ENV_PREFIX}{(info.field_name or '').upper()}"
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ValueError(
                f"{name}={url!r} must be an https URL (plain http only on loopback), "
                "e.g. https://login.example.com/realms/ops"
            )
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"{name}={url!r} must not carry a query, fragment or user information")
        if info.field_name == "public_url" and parts.path not in ("", "/"):
            raise ValueError(f"{name}={url!r} must be scheme, host and port only (the server is at /mcp)")
        # The issuer is compared character for character with the tokens' iss: keep it as given.
        return url if info.field_name == "oauth_issuer" else url.rstrip("/")

    @field_validator("oauth_scopes")
    @classmethod
    def _check_scopes(cls, value: str) -> str:
        for scope in value.replace(",", " ").split():
            # RFC 6749 section 3.3 scope-token: printable ASCII without a space, a double quote or a
            # backslash (scopes are quoted in the WWW-Authenticate challenges).
            if any(not 0x21 <= ord(c) <= 0x7E or c in '"\\' for c in scope):
                raise ValueError(
                    f"VMWARE_PILOT_OAUTH_SCOPES: {scope!r} is not an OAuth scope (RFC 6749 section 3.3)"
                )
            if scope == "offline_access":
                raise ValueError(
                    "VMWARE_PILOT_OAUTH_SCOPES must not require offline_access: a refresh token is the "
                    "client's choice, not something this resource needs (MCP 2026-07-28)"
                )
        return value

    @field_validator("oauth_roles_claim")
    @classmethod
    def _check_roles_claim(cls, value: str) -> str:
        claim = value.strip()
        if not claim:
            raise ValueError("VMWARE_PILOT_OAUTH_ROLES_CLAIM must name a claim, e.g. groups or roles")
        return claim

    @property
    def oauth_scope_list(self) -> list[str]:
        """The required scopes, in the order given."""
        return [s for s in self.oauth_scopes.replace(",", " ").split() if s]


class Settings(NetworkSettings, GateSettings, DispatchSettings, StoreSettings):
    """Every field is read from ``VMWARE_PILOT_<FIELD>`` (upper case) and documented in
    docs/settings.md; the fields are grouped by area in the bases above."""

    # A refused value is never echoed whole by pydantic: a URL may carry a password.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", frozen=True, hide_input_in_errors=True
    )

    log_level: str = Field(
        default="INFO", description="Log level of the stderr log: DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Format of the stderr log: 'text' lines, or 'json' (one object per line: time, level, "
        "logger, message, workflow_id, request_id, caller, source).",
    )

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"VMWARE_PILOT_LOG_LEVEL={value[:40]!r} is not one of {', '.join(LOG_LEVELS)}")
        return level

    @property
    def otlp_endpoint(self) -> str:
        """OpenTelemetry's own OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT (not a
        VMWARE_PILOT_ setting: the SDK reads its other variables itself); tracing is on when set."""
        return (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        ).strip()

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Setting name → environment variable, for documentation checks."""
        return {name: f"{ENV_PREFIX}{name.upper()}" for name in cls.model_fields}


def settings_problem(exc: Exception) -> str:
    """Invalid settings in one line, each problem with its variable, no value given echoed whole."""
    if not isinstance(exc, ValidationError):
        # pydantic-settings: 'error parsing value for field "x" from source "…"', the JSON error its cause
        field = re.search(r'field "(\w+)"', str(exc))
        if field is not None and isinstance(exc.__cause__, json.JSONDecodeError):
            name = f"{ENV_PREFIX}{field.group(1).upper()}"
            example = ' e.g. {"vm": "vmware-vm-mcp --flag"}' if field.group(1) == "skill_commands" else ""
            return f"{name} is not valid JSON ({exc.__cause__}); give a JSON object{example}"
        return " ".join(str(exc).split())
    problems = []
    for error in exc.errors():
        name = f"{ENV_PREFIX}{'_'.join(str(p) for p in error['loc']).upper()}" if error["loc"] else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        problems.append(message if not name or name in message else f"{name}: {message}")
    return "; ".join(problems)


def unknown_settings(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The ``VMWARE_PILOT_*`` names set in ``environ`` (default: this process's) that are no
    setting, each with the nearest known name ("" when none is near): a mistyped name would
    otherwise be ignored without a word."""
    known = [name.upper() for name in Settings.model_fields]
    found = []
    for name in sorted(os.environ if environ is None else environ):
        upper = name.upper()  # the environment is read without regard to case
        if not upper.startswith(ENV_PREFIX) or upper.startswith(_NOT_SETTINGS):
            continue
        field = upper.removeprefix(ENV_PREFIX)
        if field not in known:
            near = difflib.get_close_matches(field, known, n=1, cutoff=0.6)
            found.append((name, f"{ENV_PREFIX}{near[0]}" if near else ""))
    return found
