// C++ -O2: a template driving virtual calls.
#include <memory>
#include <vector>

#define NOINLINE __attribute__((noinline))
static volatile double sink;

struct Shape {
	virtual ~Shape() = default;
	virtual double area() const = 0;
};

struct Circle : Shape {
	double r = 1.5;
	NOINLINE double area() const override;
};

NOINLINE double circle_leaf(double r)
{
	double a = 0;
	for (int i = 0; i < 100000; i++)
		a += r * r * 3.14159 / (i + 1);
	return a;
}

double Circle::area() const { return circle_leaf(r) + sink; }

template <typename T> struct Accumulator {
	NOINLINE double total(const std::vector<std::unique_ptr<T>> &items) const
	{
		double sum = 0;
		for (const auto &item : items)
			sum += item->area();
		return sum;
	}
};

NOINLINE void drive(const std::vector<std::unique_ptr<Shape>> &shapes)
{
	Accumulator<Shape> acc;
	for (;;)
		sink = sink + acc.total(shapes);
}

int main()
{
	std::vector<std::unique_ptr<Shape>> shapes;
	shapes.push_back(std::make_unique<Circle>());
	drive(shapes);
}
