"""Every default of the research engine, named, each with the reason for its value."""

from __future__ import annotations

# Models: a capable main model, a fast cheap one for page extraction.
MAIN_MODEL = "claude-sonnet-5-5"
SMALL_MODEL = "claude-haiku-5-5"

# Output room per main-model turn: enough for a long section, small enough to stream quickly.
MAIN_MAX_TOKENS = 8_000
# Thinking on models that take a budget (not adaptive): half the turn's output room at most,
# this much at most, and the API's minimum of 1,024 at least.
THINKING_BUDGET_TOKENS = 4_000
THINKING_MIN_BUDGET = 1_024
# Extraction answers are a handful of verbatim passages.
EXTRACT_MAX_TOKENS = 2_000

# Budgets (DESIGN.md "Budgets": defaults from the research this design is based on).
STANDARD_MAX_REQUESTS = 80
DEEP_MAX_REQUESTS = 200
STANDARD_ACTIVE_SECONDS = 60 * 60  # active time: model and tool work, parallel work counted once
DEEP_ACTIVE_SECONDS = 90 * 60  # the deep profile's target
WALL_SAFETY_SECONDS = 120 * 60  # wall time, whatever the profile
# Correction capacity, counted across all the runs of one thread (a continuation inherits the count).
STANDARD_CORRECTIONS_PER_SECTION, STANDARD_CORRECTIONS_PER_THREAD = 2, 8
DEEP_CORRECTIONS_PER_SECTION, DEEP_CORRECTIONS_PER_THREAD = 6, 24
# Requests kept back from exploration so the agent can always write its answer.
FINALIZATION_RESERVE_REQUESTS = 2
# Time kept back from exploration for the final answer (one request, streamed).
FINALIZATION_RESERVE_SECONDS = 180
# Exploration stops when this share of a token or cost cap is spent; the rest is for writing.
FINALIZE_AT_SPEND_SHARE = 0.9
# …and at least this multiple of the last turn's size (the final turn is about as large, plus the answer).
FINAL_TURN_SIZE_FACTOR = 2.0
# After a stop, the final answer must come within this long, or the run ends with what it has.
STOP_FINALIZE_SECONDS = 60
# How often a running loop looks for a stop while it waits on the model or tools.
STOP_POLL_SECONDS = 0.5
# A single model request that takes longer than this is abandoned.
REQUEST_TIMEOUT_SECONDS = 300.0
# A model service that sends nothing is given up on long before that (agent/silence.py): every request
# is streamed, and a stream's headers come before the model starts (errors after them arrive as SSE
# events), so a service that has not answered in this long is not going to.
MODEL_FIRST_BYTE_SECONDS = 10.0
# …and once a stream has started, this long without a byte (events, pings): time enough for the
# prefill of a long uncached context between message_start and the first delta.
MODEL_STREAM_IDLE_SECONDS = 30.0
# A single tool call that takes longer than this is abandoned with an error result.
TOOL_DEADLINE_SECONDS = 90.0
# How many times the SDK retries 408/409/429/5xx before the run gives up on the model.
MODEL_MAX_RETRIES = 2
# An overloaded model service (529) is waited out this long before the run writes its answer
# from what it has (agent/model.py spaces the retries; agent/salvage.py writes without the model).
MODEL_PATIENCE_SECONDS = 180.0
# A turn with no tool call and no <summary> is reflection, not an answer: the run goes on, this many
# times in a row at most (a model that insists is taken at its word, so a run cannot loop on it).
REFLECTION_TURNS = 2
# A final answer citing unknown markers is sent back for a rewrite at most this often.
FINAL_ANSWER_REWRITES = 1
# The budget block warns this close to the final turn (requests or seconds before the reserve).
WRAP_UP_REQUESTS = 4
WRAP_UP_SECONDS = 5 * 60

# Page fetching.
FETCH_MAX_BYTES = 5_000_000  # larger pages are cut here; the result says so
FETCH_CONNECT_TIMEOUT = 10.0
FETCH_READ_TIMEOUT = 20.0
FETCH_TOTAL_SECONDS = 45.0  # a page that trickles in slower than this is given up
FETCH_MAX_REDIRECTS = 5
# Verbatim excerpts kept per page: more is rarely denser.
MAX_EXCERPTS = 8

# Search.
SEARCH_RESULTS = 8
SEARCH_TIMEOUT_SECONDS = 15.0
# The anthropic provider: searches one web_search call may run server-side (each is billed), and
# the small model's output room for saying which results matter (the results come back whole).
SERVER_SEARCH_MAX_USES = 1
SERVER_SEARCH_MAX_TOKENS = 1_500
# Its request waits longer than a search API: a model turn runs around the search.
SERVER_SEARCH_TIMEOUT_SECONDS = 60.0
USER_AGENT = "Deepthread/0.1 (research bot)"

# A question longer than this is refused with advice (long material goes in a file).
MAX_QUESTION_CHARS = 4_000

# Context management (DESIGN.md "Elision", "Compaction").
# The context budget when DEEPTHREAD_CONTEXT_TOKENS is unset: the models' standard window.
CONTEXT_TOKENS = 200_000
# Elide a result only when it is more than this many steps old…
ELIDE_AFTER_STEPS = 3
# …and larger than this (a stub costs ~100 tokens; smaller results are not worth the cache rewrite).
ELIDE_MIN_TOKENS = 2_000
# A result whose markers or id were used in this many latest assistant turns stays verbatim.
CITED_RECENTLY_TURNS = 3
# A batch of elisions runs only when it frees this many tokens…
ELISION_BATCH_MIN_TOKENS = 6_000
# …and at least this share of the steps whose cache it rewrites (a rewrite costs 1.25× input,
# a cached read 0.1×: small, frequent batches would cost more than they save),
ELISION_BATCH_MIN_SHARE = 0.25
# …or, once the context is this full, this smaller share (delaying compaction is worth more).
ELISION_PRESSURE_SHARE = 0.5
ELISION_PRESSURE_MIN_SHARE = 0.10
# Compaction: start at this share of the context budget, aim back to about TARGET.
COMPACT_AT_SHARE = 0.75
COMPACT_TARGET_SHARE = 0.30
# The verbatim tail kept after a compaction is at most this share of the budget.
TAIL_MAX_SHARE = 0.20
# A summary is adopted only if the real request shrinks by at least this share.
COMPACT_MIN_SAVING = 0.25
# After this many failed or useless summaries in a row, the run stops trying.
COMPACT_MAX_FAILURES = 3
# A compaction is deferred at most this often (then it goes ahead, or the context would overflow).
COMPACT_MAX_DEFERRALS = 2
# Room for the summary itself.
SUMMARY_MAX_TOKENS = 4_000
# The pinned manifest keeps at most this many exact identifiers (newest kept).
MANIFEST_MAX_ITEMS = 120

# Task agents (spawn_tasks; PROMPTS.md "Task-agent briefs").
# At most this many run at once: a comparison rarely has more independent parts, and each
# one costs several requests of the run's budget.
MAX_TASK_AGENTS = 3
# …and at most this many in a whole run (two full batches): past a second round, more delegation
# only repeats ground; the lead researches the rest itself.
MAX_TASK_AGENTS_PER_RUN = 6
# spawn_tasks is offered only with a context budget this large: a task agent needs room for
# several 3–4k-token page reads before compacting, and the lead for up to three 1–2k-token
# reports beside its own work. Below it, the tool's schema would only crowd the lead's context.
TASK_MIN_CONTEXT_TOKENS = 32_000
# The harness's hard cap on a brief's call budget: about ten research steps answer a hard
# sub-question; more than fifteen means the split was too coarse.
TASK_MAX_CALL_BUDGET = 15
# Requests a task agent keeps back for its findings (one final, tool-free turn).
TASK_RESERVE_REQUESTS = 1
# Requests the lead keeps for itself beyond its own reserve, so it can still write sections
# from what the task agents bring back.
LEAD_KEEPS_REQUESTS = 3
# A task agent with fewer requests than this cannot search, read and report: refuse to spawn it.
TASK_MIN_REQUESTS = 3
# Time a task agent keeps back for its findings (one streamed answer), at most a third of its time.
TASK_RESERVE_SECONDS = 120
# Task agents finish this long before the lead's own deadline, so their findings reach the lead.
TASK_RETURN_MARGIN_SECONDS = 15
# With less time than this before the lead must finalize, task agents cannot do useful work.
TASK_MIN_SECONDS = 60
# A task agent that fails without findings hands back at most this many of the passages it met.
TASK_FAILED_LEADS = 10
# The thread's progress line names each branch with at most this much of its objective.
TASK_LABEL_CHARS = 40

# Converting documents (thread files; PDFs and Office files from the web): each in a child process
# with OS limits, so a file built to exhaust a parser costs one killed child, never the worker.
# Address space of the child: the interpreter with every parser imported is ~200 MB; a file needs
# the rest. Keeps a hostile file's memory within 500 MB of an ordinary one's.
CONVERT_MEMORY_BYTES = 512 * 1024 * 1024
# CPU seconds the child may use (the OS ends it past this), and the wall time after which it is killed.
CONVERT_CPU_SECONDS = 20
CONVERT_WALL_SECONDS = 25.0
# The child stops reading more pages or rows after this long and returns what it has, with a note.
CONVERT_SOFT_SECONDS = 12.0
# Text a conversion returns at most (about 500k tokens): more is never read and would only fill memory.
CONVERT_MAX_CHARS = 2_000_000
# Conversions in flight per process (each may use its whole memory limit), and per run: one run's
# documents take one slot, so another run's file starts at once however many the first has queued.
CONVERT_PARALLEL = 2
CONVERT_PARALLEL_PER_RUN = 1
# Wall seconds one run may spend converting documents in all: ten slow files cannot hold a slot
# (and the run's tool deadlines) for many minutes; the files already read stay readable.
RUN_CONVERT_SECONDS = 120.0
# Zip containers (DOCX, XLSX, PPTX) are checked before any member is read: a member may inflate at
# most this many times its compressed size once it is over ZIP_RATIO_FLOOR_BYTES (XML inflates
# 5–20-fold, zeros a thousandfold), all members together to at most ZIP_MAX_TOTAL_BYTES.
ZIP_MAX_RATIO = 100
ZIP_RATIO_FLOOR_BYTES = 1024 * 1024
ZIP_MAX_TOTAL_BYTES = 128 * 1024 * 1024
ZIP_MAX_MEMBERS = 10_000
# Tables (XLSX sheets, CSV): rows kept per sheet, rows looked at (empty ones included), columns kept.
MAX_SHEET_ROWS = 5_000
MAX_SCANNED_ROWS = 200_000
MAX_SHEET_COLUMNS = 200
MAX_SHEETS = 20
# A CSV field longer than this is not data anyone cites.
MAX_CSV_FIELD_CHARS = 100_000
# PDF: pages read, the content (decoded) one page may have to be read, and all pages together. A page
# of text is 2–50 kB; a page whose content is more is skipped (extracting costs ~3 s per MB).
PDF_MAX_PAGES = 300
PDF_MAX_PAGE_CONTENT_BYTES = 1024 * 1024
PDF_MAX_CONTENT_BYTES = 24 * 1024 * 1024

# The team's MCP servers: listing one's tools at run start may take this long before the server is
# called unreachable and its tools left out; one tool call this long before it is abandoned.
MCP_START_SECONDS = 10.0
MCP_CALL_SECONDS = 30.0
MCP_RESULT_CHARS = 20_000  # a tool result's text kept (the result store has it all up to this)
MCP_PASSAGE_CHARS = 2_000  # each text part registered as a citable passage
MCP_DESCRIPTION_CHARS = 1_000  # a server's own description of a tool, shown inside ours
MCP_SCHEMA_DESCRIPTION_CHARS = 300  # each description inside a tool's input schema (one argument's)
MCP_SCHEMA_DEPTH = 12  # nesting kept in a tool's input schema; deeper parts become {} (any value)
# Bytes read of one answer of a server, counted as they arrive: far above what MCP_RESULT_CHARS keeps
# (and a listing of MCP_TOOLS_PER_SERVER tools), far below what would swell a worker (a 200 MB answer
# once took one from 188 MB to 2.3 GB because the cut came after the SDK had buffered it all).
MCP_RESPONSE_BYTES = 4 * 1024 * 1024
# Tools offered from one server and from all together: each definition is in every model request (one
# server's 3,000 tools were 1.8 MB per request). The rest are left out, in the server's order, and named.
MCP_TOOLS_PER_SERVER = 64
MCP_TOOLS_TOTAL = 128
