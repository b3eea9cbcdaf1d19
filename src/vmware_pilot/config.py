"""Settings: the only reader of the environment. Built once at start-up, never at import."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ENV_PREFIX", "Settings"]

ENV_PREFIX = "VMWARE_PILOT_"


class Settings(BaseSettings):
    """Every field is read from ``VMWARE_PILOT_<FIELD>`` (upper case) and documented in the README."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    home: Path = Field(
        default_factory=lambda: Path("~/.vmware"),
        description="Pilot home folder: database, catalog cache, custom templates (mode 0700).",
    )
    database_url: str = Field(
        default="",
        description="SQLAlchemy database URL; empty means the SQLite file pilot.db in the home.",
    )
    templates_dir: Path | None = Field(
        default=None,
        description="Folder of custom YAML templates; empty means workflows/ in the home.",
    )
    log_level: str = Field(default="INFO", description="Log level of the stderr log.")
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

    approvals: Literal["agent", "elicit", "human"] = Field(
        default="agent",
        description="Who may approve through the MCP approve tool: 'agent' (the approver it names), "
        "'elicit' (the person, through an MCP form), 'human' (nobody: only `vmware-pilot approve`).",
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

    notify_timeout: float = Field(
        default=5.0, gt=0, le=120, description="Seconds one notification attempt may take."
    )
    notify_attempts: int = Field(
        default=4, ge=1, le=10, description="Attempts per notification, with doubling backoff from 0.5 s."
    )

    @field_validator("notify_url")
    @classmethod
    def _check_notify_url(cls, value: str) -> str:
        url = value.strip()
        if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
            raise ValueError(
                f"VMWARE_PILOT_NOTIFY_URL={url!r} is not an http(s) URL with a host; set it to the "
                "receiver's address, e.g. https://hooks.example.com/pilot, or leave it empty"
            )
        return url

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
    def catalog_cache_path(self) -> Path:
        """Where `vmware-pilot catalog refresh` stores discovered skill tools."""
        return self.home_path / "catalog.json"

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Setting name → environment variable, for documentation checks."""
        return {name: f"{ENV_PREFIX}{name.upper()}" for name in cls.model_fields}
