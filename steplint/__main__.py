from steplint.cli import run

run()
