# tests/ruby.rs: Array#sort (a C function) calls back into Ruby through
# its block: <main> -> caller -> Array#sort -> block in caller -> cmp,
# cmp spinning in VM instructions. Lines the test expects end in
# "# line:<name>".

def cmp(x, y)
  i = 0
  while i < 2_000 # line:cmp_first
    i += 1
  end # line:cmp_last
  x - y
end

def caller
  [5, 3, 1, 4, 2, 9, 8, 7, 6, 0].sort { |x, y| cmp(x, y) } # line:caller
end

while true
  caller # line:main
end
