"""`python -m bot.cli`: the `deepthread` command, for processes started without the console script."""

from bot.cli.main import main

raise SystemExit(main())
