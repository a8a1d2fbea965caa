"""`python -m steplint` and the `steplint` command: Ctrl-C is handled before the imports, so that
it ends the run the same way whenever it lands."""

from steplint import interrupt


def main() -> None:
    interrupt.install()
    try:
        from steplint.cli import run
    except interrupt.Interrupted:
        interrupt.exit_interrupted()
    run()


if __name__ == "__main__":
    main()
