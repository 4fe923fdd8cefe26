# Shared helpers of the bin/ scripts; source it, do not run it. Expects ROOT (the repository root).
# find_jdk prints a JDK >= 25 (JAVA_HOME if it is one, else the first under /usr/lib/jvm);
# use_jdk exports it as JAVA_HOME and puts it first on PATH, or explains and exits;
# mvn_cmd runs the Maven wrapper when present.

java_major() { # prints the feature version of the java binary $1, or nothing
  "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p' | head -n1
}

find_jdk() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; then
    local v; v="$(java_major "$JAVA_HOME/bin/java")"
    if [ -n "$v" ] && [ "$v" -ge 25 ]; then echo "$JAVA_HOME"; return 0; fi
  fi
  local d
  for d in /usr/lib/jvm/*25* /usr/lib/jvm/*2[6-9]* /usr/lib/jvm/*3[0-9]*; do
    if [ -x "$d/bin/javac" ]; then
      local v; v="$(java_major "$d/bin/java")"
      if [ -n "$v" ] && [ "$v" -ge 25 ]; then echo "$d"; return 0; fi
    fi
  done
  return 1
}

use_jdk() { # $1: the script's name, for messages
  if ! JAVA_HOME="$(find_jdk)"; then
    echo "$1: no JDK 25 or newer found (JAVA_HOME=${JAVA_HOME:-unset}, nothing usable under /usr/lib/jvm)." >&2
    echo "$1: install one, e.g. 'apt-get install temurin-25-jdk' or 'apt-get install openjdk-25-jdk', or set JAVA_HOME to it." >&2
    exit 1
  fi
  export JAVA_HOME
  export PATH="$JAVA_HOME/bin:$PATH"
}

mvn_cmd() {
  if [ -x "$ROOT/mvnw" ]; then "$ROOT/mvnw" "$@"; else mvn "$@"; fi
}
