from .cli.main import main

if __name__ == "__main__":  # not when a `--jobs` worker process imports it (spawn)
    raise SystemExit(main())
