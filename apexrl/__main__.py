from apexrl.cli.entry import main

main()
