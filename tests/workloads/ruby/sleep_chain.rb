# tests/ruby.rs (off-CPU): the main thread waits in Kernel#sleep under
# <main> -> Object#a -> Object#b, 200 times a second. Lines the test
# expects end in "# line:<name>".

def b
  sleep 0.005 # line:b
end

def a
  b # line:a
end

while true
  a # line:main
end
