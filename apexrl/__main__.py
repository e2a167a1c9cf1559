from apexrl.cli.app import main

main()
