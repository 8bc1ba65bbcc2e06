"""What a worker process needs to run jobs, set once at start-up by the CLI.

RQ forks a work-horse per job; the horse inherits this module's state, so secrets never
travel through Redis with the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent import AgentConfig
from agent.capacity import ModelLimits
from agent.earlier import EarlierResearch
from agent.provider_config import ProviderConfig, Silence
from agent.workspace import ThreadWorkspace
from agent.workspace_search import WorkspaceSearch

from ..control.ownership import LEASE_SECONDS
from ..keyspace import keys
from ..records.models import Run

if TYPE_CHECKING:  # the SDK's HTTP client is loaded only where a run starts
    from agent.silence import ModelWatch


@dataclass
class JobRuntime:
    agent: AgentConfig = field(default_factory=AgentConfig)
    anthropic_api_key: str | None = field(default=None, repr=False)
    anthropic_base_url: str | None = None
    # Bedrock or Vertex (DEEPTHREAD_MODEL_PROVIDER); None: the Anthropic API with the key and URL above.
    model_provider: ProviderConfig | None = field(default=None, repr=False)
    # The async side of the agent (result store) opens its own connection to the same Redis.
    redis_url: str | None = None
    # A job's lease on its run (jobs/control/ownership.py), renewed every third of it; a dead worker's run
    # is recovered after at most this.
    lock_seconds: float = LEASE_SECONDS
    # The run's thread (files, earlier messages), given by the surface that knows where runs live
    # (the Slack app); None in the terminal or without a thread.
    workspace_for: Callable[[Run], ThreadWorkspace | None] | None = field(default=None, repr=False)
    # The organization's model limits per minute set by the operator; unset ones are read from
    # the service's rate-limit headers (jobs/budgets/capacity.py shares them between every run).
    model_limits: ModelLimits = field(default_factory=ModelLimits)
    # How long page texts and the request log are kept (DEEPTHREAD_BULKY_RETENTION_DAYS).
    bulky_retention_seconds: int = keys.STORED_RESULT_TTL_SECONDS
    # The team's Slack as a search acting as the requester (the run's action token); None when
    # DEEPTHREAD_WORKSPACE_SEARCH=off, in the terminal, or without a thread.
    search_for: Callable[[Run], WorkspaceSearch | None] | None = field(default=None, repr=False)
    # The team's earlier reports a run may build on, kept to what everyone in its thread may read
    # (agent/earlier.py); None in the terminal or without a thread.
    earlier_for: Callable[[Run], EarlierResearch | None] | None = field(default=None, repr=False)
    # Plan first: how long a posted plan waits for approval before the run ends unresearched.
    plan_expiry_seconds: float = 120 * 60
    # How long a model request may go without a byte (DEEPTHREAD_MODEL_FIRST_BYTE_SECONDS and
    # DEEPTHREAD_MODEL_STREAM_IDLE_SECONDS), and who is told of the requests in flight (the terminal).
    model_silence: Silence = field(default_factory=Silence)
    model_watch: ModelWatch | None = field(default=None, repr=False)

    def provider_config(self) -> ProviderConfig:
        """Where the models are bought, with what credentials."""
        if self.model_provider is not None:
            return self.model_provider
        return ProviderConfig(api_key=self.anthropic_api_key, base_url=self.anthropic_base_url)


_runtime: JobRuntime | None = None


def configure(runtime: JobRuntime) -> None:
    """Set once by the worker at start-up (its work-horses inherit it), with the engine's
    counters turned into this process's metrics."""
    global _runtime
    _runtime = runtime
    from agent.counters import install

    from ..process.metrics import PrometheusEngineCounters

    install(PrometheusEngineCounters())


def current() -> JobRuntime:
    if _runtime is None:
        raise RuntimeError("the worker was started without configuration; start it with `deepthread worker`")
    return _runtime
