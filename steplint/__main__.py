from steplint.cli import main

main()
