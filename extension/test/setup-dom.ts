// A DOM for the tests that need one (happy-dom); imported first by those test files.
import { GlobalRegistrator } from "@happy-dom/global-registrator";

if (!(globalThis as any).document) GlobalRegistrator.register();
