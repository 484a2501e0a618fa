from reports import main

raise SystemExit(main())
