/* The native half of HotspotSpin.callBack(), for tests/hotspot.rs: C
 * called from Java that calls back into Java (HotspotSpin.fromNative)
 * forever. */
#include <jni.h>

JNIEXPORT void JNICALL Java_HotspotSpin_callBack(JNIEnv *env, jclass cls)
{
	jmethodID from_native = (*env)->GetStaticMethodID(env, cls, "fromNative", "()V");
	if (from_native == NULL)
		return;
	for (;;) {
		(*env)->CallStaticVoidMethod(env, cls, from_native);
		if ((*env)->ExceptionCheck(env))
			return;
	}
}
