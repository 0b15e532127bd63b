# The http-rules scenario's request (S7, bench/rules.cfg), sourced by bench/run.sh and
# bench/callgrind.sh: a browser-like GET of a static file with a query string, a Host that is in
# hosts.map, a cookie, a forwarded-for header and an X-Debug header that the rules delete. Its
# response is the same 64 B file as S1's (the backend root's static/v3/64.png).
# shellcheck shell=bash disable=SC2034 # the variables are the sourcing script's
RULES_PATH='static/v3/64.png?lang=fr&v=20261125'
RULES_HDRS=(
  -H 'Host: www.example.com'
  -H 'User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'
  -H 'Accept: image/avif,image/webp,*/*;q=0.8'
  -H 'Accept-Language: fr-FR,fr;q=0.9,en;q=0.5'
  -H 'Cookie: session=4f9c2a7d1b; lang=fr'
  -H 'X-Forwarded-For: 198.51.100.7'
  -H 'X-Debug: 1'
)
# The same file under the path the request names, next to the backend root's 64.
rules_www() { # $1 the backend root
  mkdir -p "$1/static/v3"
  cp "$1/64" "$1/static/v3/64.png"
}
