from vmware_pilot.cli.main import main

main()
