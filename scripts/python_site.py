"""Where `make install` puts the Python module for PREFIX: the folder of PREFIX
that this python already searches (Debian's /usr/local/lib/python3.X/dist-packages,
/usr/lib/python3/dist-packages), else PREFIX/lib/python3.X/site-packages.
    python3 scripts/python_site.py PREFIX"""
import os
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
searched = [p for p in sys.path if p.startswith(prefix + "/lib/") and p.endswith("-packages")]
print(searched[0] if searched else
      sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix}))
