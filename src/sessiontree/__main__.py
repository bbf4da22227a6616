"""``python -m sessiontree``: the same command line as the ``sessiontree`` script."""

from sessiontree._launch import main

if __name__ == "__main__":
    main()
