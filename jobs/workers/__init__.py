"""The processes that do runs' work: the research job RQ runs (`execute`: the agent for one run,
every event applied to run state as it happens), the terminal's run in this process, our RQ worker
(its sweeps, a shutdown that hands the running research back) and the worker that carries many runs
at once.

The top of jobs/: may import every other package of jobs/, which must not import it in turn
(the queue names the job function by its dotted path, so serve never loads the engine)."""
