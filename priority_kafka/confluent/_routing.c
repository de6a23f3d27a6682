/* PriorityProducer.produce's common path in C.
 *
 * A Python wrapper around librdkafka's produce() costs about half the call again (a frame,
 * keyword binding); this callable forwards the caller's own arguments to
 * confluent_kafka.Producer.produce with the topic swapped for its priority topic and the
 * `priority` keyword dropped. It knows only the routes PriorityProducer has already built and
 * checked: any call it is unsure of (a topic or priority not yet routed, a priority that is not an
 * int or is an explicit None, unusual argument forms) goes to the Python method, which routes, validates,
 * remembers the route and produces. So both paths behave the same, by construction.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* Positional arguments forwarded as they are: topic, value, key, partition and the delivery
 * callback, the same five in PriorityProducer.produce and Producer.produce. Beyond them the
 * two signatures differ (Producer has on_delivery sixth), so longer calls go to Python. */
#define MAX_POSITIONAL 5
#define MAX_ARGS 16

typedef struct {
    PyObject_HEAD
    PyObject *routes;   /* dict: topic -> {priority or None: priority topic}, owned by Python */
    PyObject *produce;  /* the librdkafka Producer's bound produce */
    PyObject *fallback; /* PriorityProducer.produce, bound: the full Python path */
    /* Call sites pass the same kwnames tuple on every call: remember the last one's shape. */
    PyObject *seen_kwnames;      /* the last kwnames tuple looked at */
    PyObject *forward_kwnames;   /* it without "priority" (a new tuple, or the same one) */
    Py_ssize_t priority_at;      /* index of "priority" in it, or -1 */
    int seen_forwardable;        /* 0 when it names "callback" or "topic": Python path */
    vectorcallfunc vectorcall;
} Router;

static PyObject *str_priority, *str_callback, *str_topic;

/* Looks at a kwnames tuple once: where "priority" is, and whether the call can be forwarded. */
static int
learn_kwnames(Router *self, PyObject *kwnames)
{
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames), at = -1;
    int forwardable = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        int eq = PyUnicode_Compare(name, str_priority) == 0;
        if (eq) {
            at = i;
        }
        /* "callback" (the deprecated alias) and a keyword topic keep their Python semantics. */
        else if (PyUnicode_Compare(name, str_callback) == 0
                 || PyUnicode_Compare(name, str_topic) == 0) {
            forwardable = 0;
        }
        if (PyErr_Occurred()) {
            return -1;
        }
    }
    PyObject *forward;
    if (at < 0) {
        forward = Py_NewRef(kwnames);
    }
    else {
        forward = PyTuple_New(n - 1);
        if (forward == NULL) {
            return -1;
        }
        for (Py_ssize_t i = 0, j = 0; i < n; i++) {
            if (i != at) {
                PyTuple_SET_ITEM(forward, j++, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
            }
        }
    }
    Py_XSETREF(self->seen_kwnames, Py_NewRef(kwnames));
    Py_XSETREF(self->forward_kwnames, forward);
    self->priority_at = at;
    self->seen_forwardable = forwardable;
    return 0;
}

static PyObject *
router_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Router *self = (Router *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs < 1 || nargs > MAX_POSITIONAL || nargs + nkw > MAX_ARGS) {
        goto python_path;
    }
    PyObject *priority = Py_None, *forward_kwnames = NULL;
    if (nkw > 0) {
        if (kwnames != self->seen_kwnames && learn_kwnames(self, kwnames) < 0) {
            return NULL;
        }
        if (!self->seen_forwardable) {
            goto python_path;
        }
        if (self->priority_at >= 0) {
            priority = args[nargs + self->priority_at];
            /* priority=None given: the Python method refuses it (None keys the default). */
            if (priority == Py_None) {
                goto python_path;
            }
        }
        forward_kwnames = self->forward_kwnames;
    }
    /* bool and float priorities hash like ints: only int and None may use the look-up. */
    if (priority != Py_None && !PyLong_CheckExact(priority)) {
        goto python_path;
    }
    PyObject *topic = args[0];
    if (!PyUnicode_CheckExact(topic)) {
        goto python_path;
    }
    PyObject *levels = PyDict_GetItemWithError(self->routes, topic);
    if (levels == NULL || !PyDict_CheckExact(levels)) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        goto python_path;
    }
    PyObject *name = PyDict_GetItemWithError(levels, priority);
    if (name == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        goto python_path;
    }
    /* One spare slot in front lets librdkafka's produce be called with
     * PY_VECTORCALL_ARGUMENTS_OFFSET, as CPython itself does for bound calls. */
    PyObject *forwarded[MAX_ARGS + 1];
    Py_ssize_t n = 0;
    forwarded[++n] = name;
    for (Py_ssize_t i = 1; i < nargs; i++) {
        forwarded[++n] = args[i];
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        if (i != self->priority_at) {
            forwarded[++n] = args[nargs + i];
        }
    }
    /* Held across the call: a delivery callback run inside it could replace either. */
    Py_INCREF(name);
    Py_XINCREF(forward_kwnames);
    PyObject *result = PyObject_Vectorcall(self->produce, forwarded + 1,
                                           (size_t)nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                           forward_kwnames);
    Py_DECREF(name);
    Py_XDECREF(forward_kwnames);
    return result;

python_path:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyObject *
router_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"routes", "produce", "fallback", NULL};
    PyObject *routes, *produce, *fallback;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OO:Router", keywords,
                                     &PyDict_Type, &routes, &produce, &fallback)) {
        return NULL;
    }
    if (!PyCallable_Check(produce) || !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "Router: produce and fallback must be callable");
        return NULL;
    }
    Router *self = (Router *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->routes = Py_NewRef(routes);
    self->produce = Py_NewRef(produce);
    self->fallback = Py_NewRef(fallback);
    self->priority_at = -1;
    self->vectorcall = router_vectorcall;
    return (PyObject *)self;
}

static int
router_traverse(Router *self, visitproc visit, void *arg)
{
    Py_VISIT(self->routes);
    Py_VISIT(self->produce);
    Py_VISIT(self->fallback);
    return 0;
}

static int
router_clear(Router *self)
{
    Py_CLEAR(self->routes);
    Py_CLEAR(self->produce);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->seen_kwnames);
    Py_CLEAR(self->forward_kwnames);
    return 0;
}

static void
router_dealloc(Router *self)
{
    PyObject_GC_UnTrack(self);
    router_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The Python method it stands for, so inspect.signature() and help() show its parameters. */
static PyObject *
router_get_wrapped(Router *self, void *closure)
{
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_AttributeError, "__wrapped__");
        return NULL;
    }
    return Py_NewRef(self->fallback);
}

static PyGetSetDef router_getset[] = {
    {"__wrapped__", (getter)router_get_wrapped, NULL, NULL, NULL},
    {NULL},
};

static PyTypeObject RouterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "priority_kafka.confluent._routing.Router",
    .tp_doc = PyDoc_STR("Router(routes, produce, fallback): PriorityProducer.produce in C."),
    .tp_basicsize = sizeof(Router),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = router_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Router, vectorcall),
    .tp_traverse = (traverseproc)router_traverse,
    .tp_clear = (inquiry)router_clear,
    .tp_dealloc = (destructor)router_dealloc,
    .tp_getset = router_getset,
};

static struct PyModuleDef routing_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "priority_kafka.confluent._routing",
    .m_doc = "PriorityProducer.produce's routing in C (optional: Python does the same).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__routing(void)
{
    str_priority = PyUnicode_InternFromString("priority");
    str_callback = PyUnicode_InternFromString("callback");
    str_topic = PyUnicode_InternFromString("topic");
    if (str_priority == NULL || str_callback == NULL || str_topic == NULL
        || PyType_Ready(&RouterType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&routing_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Router", (PyObject *)&RouterType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
