"""What runs may use, shared by every worker: the organization's model capacity in Redis (one fair
queue for every run of every workspace, limits set, read from the provider or learned) and what runs
cost, with the monthly budgets that cap it (workspace, channel, person).

Above `records` (spend is recorded against a finished run's state); must not import `lifecycle`,
`upkeep` or `workers`: a budget is asked, it never starts or stops a run itself."""
