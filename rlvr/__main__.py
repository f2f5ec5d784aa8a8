from rlvr.cli import main

if __name__ == "__main__":  # vLLM's engine needs this guard when it spawns workers
    raise SystemExit(main())
