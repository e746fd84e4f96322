# tests/ruby.rs: the main thread runs <main> -> a -> b -> c forever, c
# spinning in VM instructions only (no method call: its samples are all
# at c). Lines the test expects end in "# line:<name>".

def c
  i = 0
  while i < 100_000 # line:c_first
    i += 1
  end # line:c_last
  i
end

def b
  c # line:b
end

def a
  b # line:a
end

while true
  a # line:main
end
